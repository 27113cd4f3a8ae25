// DistEnv: the worker environment a launcher (ctrun or torchrun) exports,
// read and checked once.
//
// Plain data, copyable, no torch. ReadDistEnv is the only reader of these
// variables in trainer/.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/result.h"

namespace ctrun::trainer {

struct DistEnv {
  int rank = 0;                 // RANK
  int world_size = 1;           // WORLD_SIZE
  int local_rank = 0;           // LOCAL_RANK
  int local_world_size = 1;     // LOCAL_WORLD_SIZE (defaults to WORLD_SIZE)
  std::string master_addr;      // MASTER_ADDR
  int master_port = 0;          // MASTER_PORT
  // TORCHELASTIC_USE_AGENT_STORE=True: every rank is a store client under
  // StorePrefix(); otherwise (False or unset) rank 0 hosts the TCPStore.
  bool use_agent_store = false;
  int restart_count = 0;        // TORCHELASTIC_RESTART_COUNT (0 if unset)

  // "/worker/attempt_<restart_count>" (torchrun's key prefix for workers
  // that use the agent's store); only meaningful when use_agent_store.
  std::string StorePrefix() const;
};

// Looks a variable up; nullopt when unset. Tests pass a map-backed one.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment (::getenv).
EnvLookup ProcessEnv();

// Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE and TORCHELASTIC_RESTART_COUNT.
// Returns the checked DistEnv, or:
//  - FailedPrecondition when RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT is
//    missing (the process was not started by a launcher); the message names
//    the variables and says to start it with ctrun/torchrun;
//  - InvalidArgument when a value is not a number, is out of range
//    (0 <= RANK < WORLD_SIZE, 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE,
//    0 < MASTER_PORT < 65536), or USE_AGENT_STORE is not True/False.
// LOCAL_RANK defaults to 0 and LOCAL_WORLD_SIZE to WORLD_SIZE when unset.
Result<DistEnv> ReadDistEnv(const EnvLookup& env);

}  // namespace ctrun::trainer
