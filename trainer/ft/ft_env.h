// FtEnv: what the agent of `ctrun --ft-replicas` tells each worker through
// its environment (docs/fault-tolerance.md, "The worker's side"):
// CTRUN_FT_SOCKET (the agent's socket; required), CTRUN_FT_HOST (the address
// the worker's rings and healing server bind; default 127.0.0.1),
// CTRUN_FT_GROUP (the replica group's id, used in file names; default "0")
// and CTRUN_FT_REPLICAS ("MIN:MAX" as given to --ft-replicas; MAX sizes the
// global batch of a step). Shared by the trainers' --ft loops.
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
};

using EnvReader = std::function<const char*(const char*)>;

// InvalidArgument "--ft needs ctrun --ft-replicas" when CTRUN_FT_SOCKET is
// unset or empty; InvalidArgument naming CTRUN_FT_REPLICAS when it is not
// MIN:MAX with 1 <= MAX <= 2^20.
Result<FtEnv> ReadFtEnv(const EnvReader& get = [](const char* name) { return std::getenv(name); });

}  // namespace ctrun::trainer::ft
