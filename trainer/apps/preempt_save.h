// The example workers' answer to a preemption notice (preempt_check.h),
// shared by ctrun-fashion-mnist and ctrun-gpt. At a step boundary (after
// step S's optimizer step, before the next) the ranks agree whether a
// notice has arrived; if so, every rank saves the checkpoint of step S (as
// its periodic save would), waits until every rank's part of it is
// durable, writes its marker (CTRUN_PREEMPT_SAVED_FILE), and the caller
// stops training and exits 0. Rank 0 prints
// "preempted: saved step S in X.XX s". Without a checkpoint directory
// rank 0 prints "preemption notice at step S, but no --checkpoint-dir:
// nothing saved" (stderr), every rank writes that line to its error file
// (error_file.h), writes no marker, and the caller exits 1.
//
// Thread model: the training thread only; the calls are collectives over
// the world, made at the same boundaries on every rank.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "base/result.h"
#include "trainer/checkpoint/preempt_check.h"
#include "trainer/comm/communicator.h"

namespace ctrun::trainer {

enum class PreemptOutcome {
  kNone,          // go on training
  kSaved,         // saved and marked: stop, exit 0
  kNothingSaved,  // no checkpoint directory: stop, exit 1
};

// The check over `world` (which must outlive it) when CTRUN_PREEMPT_FILE
// is set; null when preemption is off. The workers' --ft modes do not call
// it: preemption is off there (each replica group has its own world, and a
// group that goes away is healed around, not saved for).
std::unique_ptr<PreemptCheck> MakePreemptCheck(Communicator& world, at::Device device);

// Where a boundary's check runs: the check (null: off), the world it
// reduces over and the device of its tensors, and whether a checkpoint
// directory is set.
struct PreemptSite {
  PreemptCheck* check = nullptr;
  Communicator* world = nullptr;
  at::Device device{at::kCPU};
  bool has_checkpoint_dir = false;
};

// The boundary after step `step`. `save` writes that step's checkpoint
// (called on every rank, only with a checkpoint directory; a no-op when
// the step was just saved). Errors: the all-reduces' Unavailable, the
// save's or the marker's own error, or IOError when another rank could not
// save its part.
Result<PreemptOutcome> PreemptAtBoundary(const PreemptSite& site, int64_t step, const std::function<Status()>& save);

}  // namespace ctrun::trainer
