#include "trainer/apps/preempt_save.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "trainer/apps/error_file.h"
#include "trainer/comm/dist_env.h"

namespace ctrun::trainer {

std::unique_ptr<PreemptCheck> MakePreemptCheck(Communicator& world, at::Device device) {
  PreemptEnv env = ReadPreemptEnv(ProcessEnv());
  if (!env.enabled()) return nullptr;
  return std::make_unique<PreemptCheck>(std::move(env), world, device);
}

namespace {

// How many ranks of `world` report a failure (`failed` on this one).
Result<double> RanksFailed(Communicator& world, at::Device device, bool failed) {
  at::Tensor t = at::full({1}, failed ? 1.0 : 0.0, at::TensorOptions().dtype(at::kDouble).device(device));
  CTRUN_RETURN_IF_ERROR(WaitWork(world.AllReduceSum(t), "all-reduce of the preemption save's outcome"));
  return t.cpu().item<double>();
}

}  // namespace

Result<PreemptOutcome> PreemptAtBoundary(const PreemptSite& site, int64_t step, const std::function<Status()>& save) {
  if (site.check == nullptr) return PreemptOutcome::kNone;
  auto due = site.check->Due();
  if (!due.ok()) return due.status();
  if (!*due) return PreemptOutcome::kNone;
  const bool chief = site.world->rank() == 0;
  if (!site.has_checkpoint_dir) {
    const std::string line = PreemptNothingSavedLine(step);
    if (chief) std::fprintf(stderr, "%s\n", line.c_str()), std::fflush(stderr);
    WriteErrorFile(line);
    return PreemptOutcome::kNothingSaved;
  }
  const auto start = std::chrono::steady_clock::now();
  const Status saved = save();
  // Every rank's part (rank 0's file, the shards, per-rank state) is
  // durable before any rank writes its marker.
  auto failed = RanksFailed(*site.world, site.device, !saved.ok());
  if (!failed.ok()) return failed.status();
  CTRUN_RETURN_IF_ERROR(saved);
  if (*failed > 0) {
    return Status::IOError("preemption notice at step " + std::to_string(step) +
                           ": another rank could not save its part of the checkpoint (see its error); "
                           "no marker written");
  }
  CTRUN_RETURN_IF_ERROR(WritePreemptMarker(site.check->env().saved_file, step));
  if (chief) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s\n", PreemptSavedLine(step, seconds).c_str());
    std::fflush(stdout);
  }
  return PreemptOutcome::kSaved;
}

}  // namespace ctrun::trainer
