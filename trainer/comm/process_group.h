// ConnectProcessGroup: the process group a launched worker joins, built from
// the launcher's environment (DistEnv).
//
// Store: with use_agent_store, every rank is a TCPStore client of the
// launcher's store under DistEnv::StorePrefix() (torchrun's convention);
// otherwise rank 0 hosts a TCPStore server at MASTER_ADDR:MASTER_PORT and the
// others are clients. Backend: Gloo on CPU; NCCL with device cuda:LOCAL_RANK
// when built with CTRUN_TRAINER_CUDA and asked for.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/result.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/dist_env.h"

namespace ctrun::trainer {

enum class CommBackend { kGloo, kNccl };

struct ProcessGroupOptions {
  CommBackend backend = CommBackend::kGloo;
  // How long to wait for the store and for peers (also each collective's
  // timeout).
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  int gloo_threads = 2;
};

// Parses "gloo" or "nccl". InvalidArgument otherwise.
Result<CommBackend> ParseCommBackend(const std::string& name);

// True when this build has the NCCL path (CTRUN_TRAINER_CUDA).
bool HaveNccl();

// Connects to the store and creates the process group; blocks until all
// WORLD_SIZE ranks have joined. Returns the Communicator (the caller owns it),
// or:
//  - Unavailable when the store at MASTER_ADDR:MASTER_PORT cannot be reached
//    or peers do not join within `timeout` (the message names the address);
//  - FailedPrecondition when NCCL or Gloo is asked for in a build without
//    it, or no GPU exists for LOCAL_RANK.
// With Gloo, the process ignores SIGPIPE from then on, as a Python worker
// does: a write to a dead peer fails the collective instead of killing it.
Result<std::shared_ptr<Communicator>> ConnectProcessGroup(const DistEnv& env,
                                                          const ProcessGroupOptions& options);

}  // namespace ctrun::trainer
