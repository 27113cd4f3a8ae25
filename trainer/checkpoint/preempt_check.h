// PreemptCheck: at a step boundary, "is a preemption save due?", agreed by
// every rank of the world. Each rank's flag is whether ctrun's notice file
// (CTRUN_PREEMPT_FILE, preempt_env.h) exists; the flags are all-reduced
// (MAX) over the world, so one rank's view of the notice is enough and all
// ranks save at the same step. One all-reduce of one int per call, and none
// at all when preemption is off.
//
// Lifetimes: `comm` (the world's group) must outlive the PreemptCheck. Thread
// model: as the Communicator's: call Due() from the training thread, at the
// same step boundaries on every rank (it is a collective).
#pragma once

#include <c10/core/Device.h>

#include <utility>

#include "base/result.h"
#include "trainer/checkpoint/preempt_env.h"
#include "trainer/comm/communicator.h"

namespace ctrun::trainer {

class PreemptCheck {
 public:
  // `device`: where the flag is reduced (NCCL reduces GPU tensors only).
  PreemptCheck(PreemptEnv env, Communicator& comm, at::Device device)
      : env_(std::move(env)), comm_(comm), device_(device) {}

  bool enabled() const { return env_.enabled(); }
  const PreemptEnv& env() const { return env_; }

  // True when some rank sees the notice file. False without a collective
  // when preemption is off. Unavailable when the all-reduce fails.
  Result<bool> Due();

 private:
  PreemptEnv env_;
  Communicator& comm_;
  at::Device device_;
};

}  // namespace ctrun::trainer
