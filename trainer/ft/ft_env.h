// FtEnv: what the agent of `ctrun --ft-replicas` tells each worker through
// its environment (docs/fault-tolerance.md, "The worker's side"):
// CTRUN_FT_SOCKET (the agent's socket; required), CTRUN_FT_HOST (the address
// the worker's rings and healing server bind; default 127.0.0.1),
// CTRUN_FT_GROUP (the replica group's id, used in file names; default "0")
// and CTRUN_FT_REPLICAS ("MIN:MAX" as given to --ft-replicas; MAX sizes the
// global batch of a step). Shared by the trainers' --ft loops.
// CTRUN_FT_EXACT=1 (ctrun --ft-exact): the step's gradient is the exact
// mean of fixed shards (exact_average.h), the same bits under any quorum.
// CTRUN_FT_FIXED_STALL=1 (a test hook): every cross-replica wait uses the
// fixed stall time-out and no step counts as late (step_pace.h), for tests
// that sequence their groups by holding one (CTRUN_FT_HOLD: a held group
// would otherwise be benched as hung).
//
// Pure: the environment is read through `get` (std::getenv by default).
#pragma once

#include <cstdlib>
#include <functional>
#include <string>

#include "base/result.h"

namespace ctrun::trainer::ft {

struct FtEnv {
  std::string socket, host, group;
  int max_replicas = 1;
  bool fixed_stall = false;  // CTRUN_FT_FIXED_STALL=1
  bool exact = false;        // CTRUN_FT_EXACT=1
};

using EnvReader = std::function<const char*(const char*)>;

// InvalidArgument "--ft needs ctrun --ft-replicas" when CTRUN_FT_SOCKET is
// unset or empty; InvalidArgument naming CTRUN_FT_REPLICAS when it is not
// MIN:MAX with 1 <= MAX <= 2^20, or CTRUN_FT_FIXED_STALL or CTRUN_FT_EXACT
// when set to anything but 1 or empty.
Result<FtEnv> ReadFtEnv(const EnvReader& get = [](const char* name) { return std::getenv(name); });

}  // namespace ctrun::trainer::ft
