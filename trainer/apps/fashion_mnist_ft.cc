#include "trainer/apps/fashion_mnist_ft.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/apps/ft_decision.h"
#include "trainer/data/step_share.h"
#include "trainer/ft/exact_average.h"
#include "trainer/ft/fault_point.h"
#include "trainer/ft/ft_env.h"
#include "trainer/ft/ft_replica.h"
#include "trainer/ft/group_average.h"
#include "trainer/ft/heal_state.h"
#include "trainer/ft/state_dump.h"

namespace ctrun::trainer {
namespace {

using ft::ReadFtEnv;  // ft_env.h

// The sampler's permutation of the epoch in progress, kept while steps stay in it.
struct FtOrder {
  int64_t epoch = -1;
  std::vector<int64_t> order;
};

// The images and labels of share `share` of `shares` of step `step`.
Result<std::pair<at::Tensor, at::Tensor>> FtBatch(Worker& w, FtOrder& cache, int64_t step, int share, int shares,
                                                   int64_t global_batch) {
  auto range = StepShare(step, global_batch, share, shares);
  if (!range.ok()) return range.status();
  std::vector<int64_t> indices;
  for (int64_t pos = range->begin; pos < range->end; ++pos) {
    const StreamPlace place = PlaceOf(pos, w.train.size());
    if (place.epoch != cache.epoch) cache = FtOrder{place.epoch, w.sampler->EpochOrder(place.epoch)};
    indices.push_back(cache.order[static_cast<size_t>(place.offset)]);
  }
  at::Tensor idx = at::tensor(indices, at::kLong);
  return std::make_pair(w.train.images.index_select(0, idx).to(w.device),
                        w.train.labels.index_select(0, idx).to(w.device));
}

// Gradients averaged within the group (DDP), then across the quorum's
// groups; false (the ballot is no) when the ring failed.
Result<std::pair<double, bool>> FtGradients(Worker& w, ft::FtReplica& replica, const at::Tensor& x,
                                            const at::Tensor& y, std::vector<float>& flat) {
  w.opt().zero_grad();
  auto logits = w.Forward()(x);
  if (!logits.ok()) return logits.status();
  at::Tensor loss = at::cross_entropy_loss(*logits, y);
  CTRUN_RETURN_IF_ERROR(w.ddp->Backward(loss));
  const bool ok = ft::AverageAcrossGroups(replica, w.model->parameters(), flat);
  return std::make_pair(loss.item<double>(), ok);
}

// This rank's share of step `step` under `plan`, its gradients averaged.
Result<std::pair<double, bool>> FtStepGradients(Worker& w, ft::FtReplica& replica, FtOrder& order, int64_t step,
                                                const ft::FtPlan& plan, int64_t global_batch,
                                                std::vector<float>& flat) {
  auto batch = FtBatch(w, order, step, plan.replica_rank * w.env.world_size + w.env.rank,
                       plan.replica_world * w.env.world_size, global_batch);
  if (!batch.ok()) return batch.status();
  return FtGradients(w, replica, batch->first, batch->second, flat);
}

// --ft-exact (exact_average.h): this rank's fixed shards of the step, one
// backward each (within the group too: DDP does not average them), then
// their exact mean over the quorum. The loss is this rank's shards' mean.
Result<std::pair<double, bool>> FtExactGradients(Worker& w, ft::FtReplica& replica, ft::ExactAverage& exact,
                                                 FtOrder& order, int64_t step, const ft::FtPlan& plan,
                                                 int64_t global_batch, int shards) {
  const int part = plan.replica_rank * w.env.world_size + w.env.rank;
  const int parts = plan.replica_world * w.env.world_size;
  exact.Begin();
  double loss_sum = 0;
  int count = 0;
  {
    DistributedDataParallel::NoSync local(*w.ddp);
    for (int shard = part; shard < shards; shard += parts) {
      auto batch = FtBatch(w, order, step, shard, shards, global_batch);
      if (!batch.ok()) return batch.status();
      w.opt().zero_grad();
      auto logits = w.Forward()(batch->first);
      if (!logits.ok()) return logits.status();
      at::Tensor loss = at::cross_entropy_loss(*logits, batch->second);
      CTRUN_RETURN_IF_ERROR(w.ddp->Backward(loss));
      exact.AddShard();
      loss_sum += loss.item<double>();
      ++count;
    }
  }
  auto ok = exact.Reduce(*w.comm, replica, part);
  if (!ok.ok()) return ok.status();
  return std::make_pair(count > 0 ? loss_sum / count : 0.0, *ok);
}

// --dump-state: parameters, then their optimizer state, raw float32 (state_dump.h).
Status DumpFtState(Worker& w, const std::string& group) {
  return ft::DumpFtState(w.flags.dump_state + "." + group + "." + std::to_string(w.env.rank),
                         w.model->parameters(), w.opt());
}

// What a healer fetches: the model, and under --ft-exact its hint.
std::vector<ft::HealTensor> FtHealTensors(Worker& w, const std::optional<ft::ExactAverage>& exact) {
  std::vector<ft::HealTensor> tensors = ft::HealTensorsOf(*w.model);
  if (exact) {
    for (auto& t : exact->HealTensors()) tensors.push_back(std::move(t));
  }
  return tensors;
}

// Loads a fetched state (plan.heal_state) and checks its step.
Status FtHeal(Worker& w, const std::optional<ft::ExactAverage>& exact, const ft::FtPlan& plan, int64_t& committed) {
  auto step = ft::LoadHealState(*plan.heal_state, FtHealTensors(w, exact), w.opt());
  if (!step.ok()) return step.status();
  if (*step != plan.max_step) {
    return Status::FailedPrecondition("healed to step " + std::to_string(*step) + ", but the quorum trains step " +
                                      std::to_string(plan.max_step));
  }
  committed = *step;
  w.Log("ft healed step " + std::to_string(committed) + " quorum " + std::to_string(plan.quorum_id));
  return Status::Ok();
}

}  // namespace

Status CheckFtEnvironment() { return ReadFtEnv().status(); }

Status TrainFt(Worker& w) {
  auto env = ReadFtEnv();
  if (!env.ok()) return env.status();
  auto fault = ft::ParseFtFault(std::getenv("CTRUN_FT_FAULT"), std::getenv("TORCHELASTIC_RESTART_COUNT"));
  if (!fault.ok()) return fault.status();
  auto hold = ft::ParseFtHold(std::getenv("CTRUN_FT_HOLD"), std::getenv("TORCHELASTIC_RESTART_COUNT"));
  if (!hold.ok()) return hold.status();
  const int local_rank = w.env.local_rank;
  ft::FtReplicaOptions options{.socket_path = env->socket, .host = env->host, .local_rank = w.env.local_rank};
  options.adaptive_stall = !env->fixed_stall;
  options.heal_send_hook = ft::ServeFault(*fault, local_rank);
  auto replica = ft::FtReplica::Start(std::move(options));
  if (!replica.ok()) return replica.status();
  const int64_t global_batch = w.flags.batch_size * w.env.world_size * env->max_replicas;
  int64_t total = w.flags.max_steps > 0 ? w.flags.max_steps
                                              : w.flags.epochs * ((w.train.size() + global_batch - 1) / global_batch);
  int64_t committed = 0;
  CTRUN_RETURN_IF_ERROR(ft::MaybeHold(*hold, ft::FtHold::kJoin));
  auto joined = (*replica)->Join(committed);
  if (!joined.ok()) return joined.status();
  ft::FtPlan plan = std::move(*joined);
  FtOrder order;
  std::vector<float> flat;
  // --ft-exact: one shard per rank of a full quorum, each a --batch-size.
  const int shards = w.env.world_size * env->max_replicas;
  std::optional<ft::ExactAverage> exact;
  if (env->exact) {
    exact.emplace(w.model->parameters(), shards);
    w.Log("ft exact: each step is " + std::to_string(shards) + " shards of " + std::to_string(w.flags.batch_size) +
          " samples, added exactly");
  }
  const char* stop_path = std::getenv("CTRUN_FT_STOP");
  while (!plan.finished_step) {
    auto stop = ft::ReadFtStop(stop_path);
    if (!stop.ok()) return stop.status();
    if (*stop) total = std::min(total, **stop);
    if (committed >= total) break;
    if (plan.heal_state) CTRUN_RETURN_IF_ERROR(FtHeal(w, exact, plan, committed));
    if (plan.serve) {
      auto snapshot = ft::SaveHealState(FtHealTensors(w, exact), w.opt(), committed);
      if (!snapshot.ok()) return snapshot.status();
      (*replica)->Offer(std::make_shared<const std::string>(std::move(*snapshot)));
    }
    ft::MaybeFail(*fault, local_rank, committed, ft::FaultPoint::kTrain);
    CTRUN_RETURN_IF_ERROR(ft::MaybeHold(*hold, committed));
    auto step = exact ? FtExactGradients(w, **replica, *exact, order, committed, plan, global_batch, shards)
                      : FtStepGradients(w, **replica, order, committed, plan, global_batch, flat);
    if (!step.ok()) return step.status();
    ft::MaybeFail(*fault, local_rank, committed, ft::FaultPoint::kVote);
    auto decision = (*replica)->Vote(step->second);
    if (!decision.ok()) return decision.status();
    w.Log(ApplyFtDecision(*decision, plan, step->first, step->second, **replica, committed, [&] {
      w.opt().step();
      if (exact) exact->Commit();
    }));
    plan = std::move(decision->next);
  }
  CTRUN_RETURN_IF_ERROR((*replica)->Finish());
  if (plan.finished_step) {  // no state of the run's end to dump
    w.Log("ft the run finished at step " + std::to_string(*plan.finished_step) +
          " before this group rejoined: nothing is left to train");
    return Status::Ok();
  }
  if (!w.flags.dump_state.empty()) CTRUN_RETURN_IF_ERROR(DumpFtState(w, env->group));
  if (exact) {
    w.Log("ft exact: steps summed twice (their gradients outgrew the hint): " +
          std::to_string(exact->second_sums()));
  }
  w.Log("done: " + std::to_string(committed) + " committed steps");
  return Status::Ok();
}

}  // namespace ctrun::trainer
