// ctrun-fashion-mnist: the example worker. Trains SmallCnn on Fashion-MNIST
// with DistributedDataParallel (or ZeRO-1, ZeRO-2/FSDP: --strategy), one
// process per rank, under ctrun/torchrun.
#include <ATen/ATen.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>

#include "trainer/apps/app_main.h"
#include "trainer/apps/fashion_mnist_ft.h"
#include "trainer/apps/fashion_mnist_worker.h"
#include "trainer/apps/train_flags.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/checkpoint/remove_tree.h"
#include "trainer/checkpoint/sharded_checkpoint.h"
#include "trainer/checkpoint/topk_state.h"
#include "trainer/ft/fault_point.h"
#include "trainer/parallel/storage_bytes.h"

namespace ctrun::trainer {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Loss sum and correct count of `model` over test samples rank, rank+R, ...
Result<std::pair<double, double>> Evaluate(SmallCnn& model, const ForwardFn& forward,
                                           const ImageDataset& test, int rank, int world,
                                           const at::Device& device) {
  at::NoGradGuard no_grad;
  model->eval();
  at::Tensor idx = at::arange(rank, test.size(), world, at::kLong);
  double loss = 0, correct = 0;
  for (int64_t begin = 0; begin < idx.numel(); begin += 1000) {
    at::Tensor part = idx.narrow(0, begin, std::min<int64_t>(1000, idx.numel() - begin));
    at::Tensor x = test.images.index_select(0, part).to(device);
    at::Tensor y = test.labels.index_select(0, part).to(device);
    auto logits = forward(x);
    if (!logits.ok()) return logits.status();
    loss += at::cross_entropy_loss(*logits, y, {}, at::Reduction::Sum).item<double>();
    correct += logits->argmax(1).eq(y).sum().item<double>();
  }
  model->train();
  return std::make_pair(loss, correct);
}

// Sums over the epoch's steps on this rank.
struct EpochTotals {
  double loss_sum = 0, correct = 0, seen = 0;
};

// The --bench-warmup window: from the end of step --bench-warmup to the end.
struct BenchWindow {
  double start = 0;
  int64_t samples = 0;
  DdpStats base;
};

// Under top-k, every rank writes its state for this step (topk_state.h),
// and the ranks agree that every write succeeded before rank 0 commits.
Status SaveTopk(Worker& w) {
  if (!w.ddp || w.flags.topk_density <= 0) return Status::Ok();
  const int64_t step = w.position.step;
  Status saved = SaveTopkState(w.ddp->topk_state(), TopkStatePath(w.flags.checkpoint_dir, step, w.env.rank), step,
                               w.env.rank, w.env.world_size);
  auto failed = w.SumOverRanks({saved.ok() ? 0.0 : 1.0});
  if (!failed.ok()) return failed.status();
  if (!saved.ok()) return saved;
  if ((*failed)[0] > 0) {
    return Status::IOError("another rank could not write its top-k state for step " + std::to_string(step) +
                           "; the checkpoint was not saved");
  }
  return Status::Ok();
}

// DDP: the top-k files first, then rank 0's checkpoint.pt, the commit
// point; older top-k steps go only after it. FSDP: the sharded checkpoint.
Status Save(Worker& w) {
  if (w.ckpt_path.empty()) return Status::Ok();
  if (w.fsdp) return SaveShardedCheckpoint(w.sharded_dir, *w.fsdp, w.opt(), w.position);
  CTRUN_RETURN_IF_ERROR(SaveTopk(w));
  if (!w.chief) return Status::Ok();
  const std::string& dir = w.flags.checkpoint_dir;
  // A stale top-k directory must not pair with a checkpoint saved without top-k.
  if (w.flags.topk_density <= 0 && !RemoveTree(TopkStateDir(dir, w.position.step))) {
    return Status::IOError("cannot remove the stale top-k state '" + TopkStateDir(dir, w.position.step) +
                           "'; remove it by hand (the checkpoint was not saved)");
  }
  CTRUN_RETURN_IF_ERROR(SaveCheckpoint(w.ckpt_path, *w.model, w.opt(), w.position));
  RemoveOldTopkStates(dir, w.position.step);
  return Status::Ok();
}

// One optimizer step on `x`, `y` (`count` samples): forward, backward (grads
// synchronised), step; adds to `totals`. Returns the batch's loss.
Result<at::Tensor> TrainStep(Worker& w, const at::Tensor& x, const at::Tensor& y, size_t count,
                             EpochTotals& totals) {
  if (w.zero) {
    w.zero->ZeroGrad();
  } else {
    w.opt().zero_grad();
  }
  auto logits_or = w.Forward()(x);
  if (!logits_or.ok()) return logits_or.status();
  at::Tensor logits = *logits_or;
  at::Tensor loss = at::cross_entropy_loss(logits, y);
  CTRUN_RETURN_IF_ERROR(w.fsdp ? w.fsdp->Backward(loss) : w.ddp->Backward(loss));
  if (w.zero) {
    CTRUN_RETURN_IF_ERROR(w.zero->Step());
  } else {
    w.opt().step();
  }
  ++w.position.step;
  w.position.epoch_consumed += static_cast<int64_t>(count) * w.env.world_size;
  w.position.world_size = w.env.world_size;
  at::NoGradGuard no_grad;
  totals.loss_sum += loss.item<double>() * static_cast<double>(count);
  totals.correct += logits.argmax(1).eq(y).sum().item<double>();
  totals.seen += static_cast<double>(count);
  return loss;
}

// After each step: the bench window, the log line, a periodic checkpoint.
// Returns true when --max-steps is reached.
Result<bool> AfterStep(Worker& w, const at::Tensor& loss, size_t count, BenchWindow& bench) {
  const TrainFlags& flags = w.flags;
  if (flags.bench_warmup > 0) {
    if (w.position.step == flags.bench_warmup) {
      bench.start = Now();
      bench.base = w.ddp_stats();
      if (w.fsdp) w.fsdp->ResetPeaks();
    } else if (w.position.step > flags.bench_warmup) {
      bench.samples += static_cast<int64_t>(count) * w.env.world_size;
    }
  }
  if (flags.log_every > 0 && w.position.step % flags.log_every == 0) {
    char line[160];
    std::snprintf(line, sizeof line, "epoch %lld step %lld: loss %.4f (rank 0, last batch)",
                  static_cast<long long>(w.position.epoch), static_cast<long long>(w.position.step),
                  loss.item<double>());
    w.Log(line);
  }
  const bool last_step = flags.max_steps > 0 && w.position.step >= flags.max_steps;
  if (flags.checkpoint_every > 0 && w.position.step % flags.checkpoint_every == 0 && !last_step) {
    CTRUN_RETURN_IF_ERROR(Save(w));
  }
  return last_step;
}

// The preemption check at the step boundary after w.position.step
// (preempt_save.h); `save` writes this step's checkpoint. True when the run
// must stop here (w.preempted says how).
Result<bool> PreemptHere(Worker& w, const std::function<Status()>& save) {
  auto outcome = PreemptAtBoundary(PreemptSite{.check = w.preempt.get(), .world = w.comm.get(), .device = w.device,
                                               .has_checkpoint_dir = !w.ckpt_path.empty()},
                                   w.position.step, save);
  if (!outcome.ok()) return outcome.status();
  w.preempted = *outcome;
  return *outcome != PreemptOutcome::kNone;
}

// Trains on the rest of the current epoch's samples. Returns true when
// --max-steps stopped it early.
Result<bool> TrainEpoch(Worker& w, EpochTotals& totals, BenchWindow& bench) {
  // CTRUN_FT_FAULT's train point (fault_point.h), for bench/ft.sh's whole-job restart baseline.
  auto fault = ft::ParseFtFault(std::getenv("CTRUN_FT_FAULT"), std::getenv("TORCHELASTIC_RESTART_COUNT"));
  if (!fault.ok()) return fault.status();
  const std::vector<int64_t> indices = w.sampler->IndicesFrom(w.position.epoch, w.position.epoch_consumed);
  const size_t batch = static_cast<size_t>(w.flags.batch_size);
  for (size_t begin = 0; begin < indices.size(); begin += batch) {
    ft::MaybeFail(*fault, w.env.local_rank, w.position.step, ft::FaultPoint::kTrain);
    const size_t count = std::min(indices.size() - begin, batch);
    at::Tensor idx = at::from_blob(const_cast<int64_t*>(indices.data() + begin),
                                   {static_cast<int64_t>(count)}, at::kLong);
    at::Tensor x = w.train.images.index_select(0, idx).to(w.device);
    at::Tensor y = w.train.labels.index_select(0, idx).to(w.device);
    auto loss = TrainStep(w, x, y, count, totals);
    if (!loss.ok()) return loss.status();
    auto stop = AfterStep(w, *loss, count, bench);
    if (!stop.ok() || *stop) return stop;
    // The step boundary's preemption check; the epoch's last step has its
    // boundary after the epoch's end (Run), so a resume starts a new epoch.
    if (begin + batch < indices.size()) {
      const bool just_saved = w.flags.checkpoint_every > 0 && w.position.step % w.flags.checkpoint_every == 0;
      auto preempted = PreemptHere(w, [&w, just_saved] { return just_saved ? Status::Ok() : Save(w); });
      if (!preempted.ok() || *preempted) return preempted;
    }
  }
  return false;
}

// Logs the epoch's train metrics and, after every --eval-every'th epoch and
// the run's last (`last`), its test metrics (summed over ranks), and moves
// the position to the next epoch. Every rank decides alike: the sums are
// collective.
Status FinishEpoch(Worker& w, const EpochTotals& totals, double epoch_start, bool last) {
  const bool eval = last || (w.position.epoch + 1) % w.flags.eval_every == 0;
  double test_loss = 0, test_correct = 0;
  if (eval) {
    auto evaluated = Evaluate(w.model, w.Forward(), w.test, w.env.rank, w.env.world_size, w.device);
    if (!evaluated.ok()) return evaluated.status();
    std::tie(test_loss, test_correct) = *evaluated;
  }
  auto sums = w.SumOverRanks({totals.loss_sum, totals.correct, totals.seen, test_loss, test_correct});
  if (!sums.ok()) return sums.status();
  const auto& v = *sums;
  char test[96] = "";
  if (eval) {
    std::snprintf(test, sizeof test, " | test loss %.4f acc %.4f", v[3] / static_cast<double>(w.test.size()),
                  v[4] / static_cast<double>(w.test.size()));
  }
  char line[256];
  std::snprintf(line, sizeof line, "epoch %lld done: train loss %.4f acc %.4f%s | %.1f s",
                static_cast<long long>(w.position.epoch), v[0] / std::max(1.0, v[2]),
                v[1] / std::max(1.0, v[2]), test, Now() - epoch_start);
  w.Log(line);
  ++w.position.epoch;
  w.position.epoch_consumed = 0;
  return Status::Ok();
}

// The BENCH line: throughput, communication overlap and memory over the
// bench window.
void LogBench(Worker& w, const BenchWindow& bench) {
  const double seconds = Now() - bench.start;
  DdpStats s = w.ddp_stats();
  DdpStats window;
  window.comm_span_seconds = s.comm_span_seconds - bench.base.comm_span_seconds;
  window.exposed_seconds = s.exposed_seconds - bench.base.exposed_seconds;
  window.wire_bytes = s.wire_bytes - bench.base.wire_bytes;
  window.dense_bytes = s.dense_bytes - bench.base.dense_bytes;
  const double steps = static_cast<double>(w.position.step - w.flags.bench_warmup);
  // Parameter + gradient + optimizer-state bytes this rank holds between
  // steps (tensor storage, each once), and at the peak of a step: DDP's
  // gradients are views of its buckets (the buckets count once); FSDP's
  // gathered units and gradient buffers are measured by the core.
  int64_t state_bytes = 0, peak_bytes = 0;
  const int64_t optim_bytes = OptimizerStateBytes(w.opt());
  if (w.fsdp) {
    const FsdpMemory m = w.fsdp->Memory();
    state_bytes = m.shard_param_bytes + m.shard_grad_bytes + optim_bytes;
    peak_bytes = state_bytes + m.peak_held_bytes;
  } else {
    std::vector<at::Tensor> params = w.model->parameters(), grads;
    for (const auto& p : params) grads.push_back(p.grad());
    state_bytes = StorageBytes(params) + StorageBytes(grads) + optim_bytes;
    std::vector<at::Tensor> held = grads;
    if (w.ddp) {
      for (const auto& flat : w.ddp->Buckets()) held.push_back(flat);
    }
    peak_bytes = StorageBytes(params) + StorageBytes(held) + optim_bytes;
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  char line[512];
  std::snprintf(line, sizeof line,
                "BENCH samples_per_s=%.1f hidden_share=%.3f step_ms=%.3f comm_ms=%.3f "
                "exposed_ms=%.3f steps=%.0f state_bytes=%lld peak_bytes=%lld maxrss_kb=%ld "
                "wire_bytes_per_step=%.0f dense_bytes_per_step=%.0f",
                static_cast<double>(bench.samples) / seconds, window.HiddenShare(),
                1e3 * seconds / steps, 1e3 * window.comm_span_seconds / steps,
                1e3 * window.exposed_seconds / steps, steps, static_cast<long long>(state_bytes),
                static_cast<long long>(peak_bytes), usage.ru_maxrss,
                static_cast<double>(window.wire_bytes) / steps, static_cast<double>(window.dense_bytes) / steps);
  w.Log(line);
}

// The WIRE line (under --grad-compression): the gradient payload rank 0 put
// into collectives over the whole run against plain float32 all-reduces.
void LogWire(Worker& w) {
  const DdpStats s = w.ddp_stats();
  char line[256];
  std::snprintf(line, sizeof line, "WIRE compression=%s synced_steps=%lld wire_bytes=%lld dense_bytes=%lld "
                "wire_ratio=%.5f", w.flags.grad_compression.c_str(), static_cast<long long>(s.synced_steps),
                static_cast<long long>(s.wire_bytes), static_cast<long long>(s.dense_bytes),
                s.dense_bytes > 0 ? static_cast<double>(s.wire_bytes) / static_cast<double>(s.dense_bytes) : 0.0);
  w.Log(line);
}

// --dump-params: the final parameters, float32, in the model's order, written
// by rank 0. Under zero2/fsdp the root's parameters are freed: every rank
// takes part in gathering them.
Status DumpParams(Worker& w) {
  std::vector<at::Tensor> final_params = w.model->parameters();
  if (w.fsdp) {
    std::map<std::string, at::Tensor> by_name;
    for (size_t u = 0; u < w.fsdp->unit_count(); ++u) {
      at::Tensor send = w.fsdp->shard(u).detach();
      at::Tensor full = at::empty({send.numel() * w.comm->size()}, send.options());
      CTRUN_RETURN_IF_ERROR(WaitWork(w.comm->AllGather(send, full), "all-gather of parameters"));
      for (const auto& e : w.fsdp->layout(u).entries) {
        by_name[e.name] = full.narrow(0, e.offset, e.numel);
      }
    }
    final_params.clear();
    for (const auto& item : w.model->named_parameters()) final_params.push_back(by_name.at(item.key()));
  }
  if (!w.chief) final_params.clear();
  std::ofstream out;
  if (w.chief) out.open(w.flags.dump_params, std::ios::binary | std::ios::trunc);
  for (const auto& param : final_params) {
    at::Tensor flat = param.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
    out.write(reinterpret_cast<const char*>(flat.data_ptr<float>()),
              static_cast<std::streamsize>(flat.numel() * sizeof(float)));
  }
  if (w.chief && !out) return Status::IOError("cannot write --dump-params '" + w.flags.dump_params + "'");
  return Status::Ok();
}

// Returns the exit code: 0, or 1 when a preemption notice came without
// --checkpoint-dir (preempt_save.h).
Result<int> Run(const TrainFlags& flags) {
  if (flags.ft) CTRUN_RETURN_IF_ERROR(CheckFtEnvironment());
  Worker w(flags);
  CTRUN_RETURN_IF_ERROR(SetUp(w));
  w.Log("training SmallCnn on " + std::to_string(w.train.size()) + " Fashion-MNIST images: " +
        std::to_string(w.env.world_size) + " ranks (" + w.comm->backend() + "), batch " +
        std::to_string(flags.batch_size) + " per rank, strategy " + flags.strategy +
        (w.fsdp ? " (FSDP units: " + std::to_string(w.fsdp->unit_count()) + ")" : std::string()) + ", " +
        std::to_string(flags.epochs) + " epochs, " + std::to_string(w.threads) + " threads per rank");
  // Under --ft preemption stays off (preempt_save.h: MakePreemptCheck).
  if (flags.ft) {
    CTRUN_RETURN_IF_ERROR(TrainFt(w));
    return 0;
  }
  w.preempt = MakePreemptCheck(*w.comm, w.device);

  bool stop = false;
  BenchWindow bench;
  while (w.position.epoch < flags.epochs && !stop) {
    const double epoch_start = Now();
    EpochTotals totals;
    auto stopped = TrainEpoch(w, totals, bench);
    if (!stopped.ok()) return stopped.status();
    if (w.preempted != PreemptOutcome::kNone) break;
    stop = *stopped;
    if (!stop || w.position.epoch_consumed >= w.train.size()) {
      CTRUN_RETURN_IF_ERROR(FinishEpoch(w, totals, epoch_start, stop || w.position.epoch + 1 >= flags.epochs));
    }
    CTRUN_RETURN_IF_ERROR(Save(w));
    if (!stop && w.position.epoch < flags.epochs) {  // the boundary after the epoch's last step: just saved
      auto preempted = PreemptHere(w, [] { return Status::Ok(); });
      if (!preempted.ok()) return preempted.status();
      if (*preempted) break;
    }
  }
  if (w.preempted != PreemptOutcome::kNone) return w.preempted == PreemptOutcome::kSaved ? kExitOk : kExitFailure;
  if (w.fsdp && !w.ckpt_path.empty()) {
    CTRUN_RETURN_IF_ERROR(SaveFullCheckpoint(w.ckpt_path, "", *w.model, *w.fsdp, w.opt(), w.position));
  }
  CTRUN_RETURN_IF_ERROR(WaitWork(w.comm->Barrier(), "final barrier"));
  if (flags.bench_warmup > 0 && bench.start > 0) LogBench(w, bench);
  if (!flags.dump_params.empty()) CTRUN_RETURN_IF_ERROR(DumpParams(w));
  if (w.ddp && flags.grad_compression != "none") LogWire(w);
  w.Log("done: " + std::to_string(w.position.step) + " steps");
  return 0;
}

}  // namespace
}  // namespace ctrun::trainer

int main(int argc, char** argv) {
  using namespace ctrun::trainer;
  StartApp(argc, argv);
  auto flags = ParseTrainFlags(AppArgs(argc, argv));
  if (!flags.ok()) return EndWithError("ctrun-fashion-mnist", flags.status(), kExitUsage);
  if (flags->help) {
    std::fputs(TrainUsage().c_str(), stdout);
    return kExitOk;
  }
  return FinishApp("ctrun-fashion-mnist", [&]() -> AppOutcome {
    auto ran = Run(*flags);
    if (!ran.ok()) return {ran.status(), kExitFailure};
    return {ctrun::Status::Ok(), *ran};
  });
}
