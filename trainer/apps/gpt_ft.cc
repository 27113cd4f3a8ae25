#include "trainer/apps/gpt_ft.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/apps/ft_decision.h"
#include "trainer/data/step_share.h"
#include "trainer/ft/fault_point.h"
#include "trainer/ft/ft_env.h"
#include "trainer/ft/ft_replica.h"
#include "trainer/ft/group_average.h"
#include "trainer/ft/heal_state.h"
#include "trainer/ft/state_dump.h"

namespace ctrun::trainer {
namespace {

void Log(const GptFtParts& p, const std::string& line) {
  if (p.env.rank != 0) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// This rank's rows (tokens, targets) of step `step` under `plan`.
Result<std::pair<at::Tensor, at::Tensor>> FtRows(const GptFtParts& p, int64_t step, const ft::FtPlan& plan) {
  const int group_world = p.env.world_size;
  auto range = StepShare(step, p.flags.global_batch, plan.replica_rank * group_world + p.env.rank,
                         plan.replica_world * group_world);
  if (!range.ok()) return range.status();
  TokenBatch batch = SampleBatch(p.corpus, step, p.flags.seed, p.flags.global_batch, p.flags.seq_len);
  const int64_t first = range->begin - step * p.flags.global_batch;  // the step's row of stream position begin
  const int64_t rows = range->end - range->begin;
  return std::make_pair(batch.tokens.narrow(0, first, rows).to(p.device),
                        batch.targets.narrow(0, first, rows).to(p.device));
}

// What the optimizer steps and healing moves: the module's parameters, or
// under FSDP this rank's shards.
std::vector<at::Tensor> FtParams(const GptFtParts& p) {
  return p.fsdp != nullptr ? p.fsdp->parameters() : p.model.parameters();
}

// The healing state's tensors: the module's, or under FSDP this rank's
// shards ("shard/<unit>") and the module's buffers.
std::vector<ft::HealTensor> FtHealTensors(const GptFtParts& p) {
  if (p.fsdp == nullptr) return ft::HealTensorsOf(p.model);
  std::vector<ft::HealTensor> out;
  for (size_t u = 0; u < p.fsdp->unit_count(); ++u) {
    out.push_back({"shard/" + std::to_string(u), p.fsdp->shard(u), false});
  }
  for (const auto& item : p.model.named_buffers(true)) out.push_back({item.key(), item.value(), true});
  return out;
}

// Gradients averaged within the group (DDP, or FSDP's reduce-scatter), then
// across the quorum's groups; false (the ballot is no) when the ring failed.
Result<std::pair<double, bool>> FtGradients(const GptFtParts& p, ft::FtReplica& replica, const at::Tensor& tokens,
                                            const at::Tensor& targets, std::vector<float>& flat) {
  p.optimizer.zero_grad();
  at::Tensor loss;
  if (p.fsdp != nullptr) {
    auto logits = p.fsdp->Forward(tokens);
    if (!logits.ok()) return logits.status();
    loss = p.model.Loss(*logits, targets);
    CTRUN_RETURN_IF_ERROR(p.fsdp->Backward(loss));
  } else {
    loss = p.model.Loss(p.model.chunk(0).Forward(tokens), targets);
    if (p.ddp != nullptr) {
      CTRUN_RETURN_IF_ERROR(p.ddp->Backward(loss));
    } else {
      loss.backward();
    }
  }
  const bool ok = ft::AverageAcrossGroups(replica, FtParams(p), flat);
  return std::make_pair(loss.item<double>(), ok);
}

// Loads a fetched state (plan.heal_state) and checks its step.
Status FtHeal(const GptFtParts& p, const ft::FtPlan& plan, int64_t& committed) {
  auto step = ft::LoadHealState(*plan.heal_state, FtHealTensors(p), p.optimizer);
  if (!step.ok()) return step.status();
  if (*step != plan.max_step) {
    return Status::FailedPrecondition("healed to step " + std::to_string(*step) + ", but the quorum trains step " +
                                      std::to_string(plan.max_step));
  }
  committed = *step;
  Log(p, "ft healed step " + std::to_string(committed) + " quorum " + std::to_string(plan.quorum_id));
  return Status::Ok();
}

// The test hooks (fault_point.h), read once.
struct FtHooks {
  std::optional<ft::FtFault> fault;
  std::optional<ft::FtHold> hold;
};

Result<FtHooks> ReadHooks() {
  auto fault = ft::ParseFtFault(std::getenv("CTRUN_FT_FAULT"), std::getenv("TORCHELASTIC_RESTART_COUNT"));
  if (!fault.ok()) return fault.status();
  auto hold = ft::ParseFtHold(std::getenv("CTRUN_FT_HOLD"), std::getenv("TORCHELASTIC_RESTART_COUNT"));
  if (!hold.ok()) return hold.status();
  return FtHooks{*fault, *hold};
}

// The step loop from the first plan until --steps are committed.
Status FtLoop(const GptFtParts& p, ft::FtReplica& replica, const FtHooks& hooks, ft::FtPlan plan,
              int64_t& committed, std::optional<int64_t>& finished) {
  const int local_rank = p.env.local_rank;
  std::vector<float> flat;
  while (committed < p.flags.steps && !plan.finished_step) {
    if (plan.heal_state) CTRUN_RETURN_IF_ERROR(FtHeal(p, plan, committed));
    if (plan.serve) {
      auto snapshot = ft::SaveHealState(FtHealTensors(p), p.optimizer, committed);
      if (!snapshot.ok()) return snapshot.status();
      replica.Offer(std::make_shared<const std::string>(std::move(*snapshot)));
    }
    ft::MaybeFail(hooks.fault, local_rank, committed, ft::FaultPoint::kTrain);
    CTRUN_RETURN_IF_ERROR(ft::MaybeHold(hooks.hold, committed));
    auto rows = FtRows(p, committed, plan);
    if (!rows.ok()) return rows.status();
    auto step = FtGradients(p, replica, rows->first, rows->second, flat);
    if (!step.ok()) return step.status();
    ft::MaybeFail(hooks.fault, local_rank, committed, ft::FaultPoint::kVote);
    auto decision = replica.Vote(step->second);
    if (!decision.ok()) return decision.status();
    Log(p, ApplyFtDecision(*decision, plan, step->first, step->second, replica, committed,
                           [&] { p.optimizer.step(); }));
    plan = std::move(decision->next);
  }
  finished = plan.finished_step;
  return Status::Ok();
}

}  // namespace

Status CheckGptFtEnvironment() {
  auto env = ft::ReadFtEnv();
  if (!env.ok()) return env.status();
  if (env->exact) {
    return Status::InvalidArgument(
        "CTRUN_FT_EXACT=1 (ctrun --ft-exact): ctrun-gpt --ft adds its gradients in float; exact results are "
        "ctrun-fashion-mnist's (drop --ft-exact)");
  }
  return Status::Ok();
}

Status TrainGptFt(const GptFtParts& p) {
  auto env = ft::ReadFtEnv();
  if (!env.ok()) return env.status();
  const int64_t shares = static_cast<int64_t>(env->max_replicas) * p.env.world_size;
  if (p.flags.global_batch < shares) {
    return Status::InvalidArgument("--ft: --global-batch " + std::to_string(p.flags.global_batch) +
                                   " is less than MAX replicas x WORLD_SIZE (" + std::to_string(shares) +
                                   "); every rank needs a row");
  }
  auto hooks = ReadHooks();
  if (!hooks.ok()) return hooks.status();
  ft::FtReplicaOptions options{.socket_path = env->socket, .host = env->host, .local_rank = p.env.local_rank};
  options.adaptive_stall = !env->fixed_stall;
  options.heal_send_hook = ft::ServeFault(hooks->fault, p.env.local_rank);
  auto replica = ft::FtReplica::Start(std::move(options));
  if (!replica.ok()) return replica.status();
  int64_t committed = 0;
  CTRUN_RETURN_IF_ERROR(ft::MaybeHold(hooks->hold, ft::FtHold::kJoin));
  auto joined = (*replica)->Join(committed);
  if (!joined.ok()) return joined.status();
  std::optional<int64_t> finished;
  CTRUN_RETURN_IF_ERROR(FtLoop(p, **replica, *hooks, std::move(*joined), committed, finished));
  CTRUN_RETURN_IF_ERROR((*replica)->Finish());
  if (finished) {  // no state of the run's end to dump
    Log(p, "ft the run finished at step " + std::to_string(*finished) +
               " before this group rejoined: nothing is left to train");
    return Status::Ok();
  }
  if (!p.flags.dump_state.empty()) {
    const std::string path = p.flags.dump_state + "." + env->group + "." + std::to_string(p.env.rank);
    CTRUN_RETURN_IF_ERROR(ft::DumpFtState(path, FtParams(p), p.optimizer));
  }
  Log(p, "done: " + std::to_string(committed) + " committed steps");
  return Status::Ok();
}

}  // namespace ctrun::trainer
