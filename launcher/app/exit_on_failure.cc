#include "launcher/app/exit_on_failure.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "launcher/cli/exit_codes.h"

namespace ctrun::launcher {

int ExitOnFailure(const Status& failure) {
  if (failure.IsInvalidArgument()) {
    std::fprintf(stderr, "ctrun: error: %s\n", failure.message().c_str());
    return kExitUsage;
  }
  spdlog::error("{}", failure.message());
  return kExitFailure;
}

Status AsUsageError(const Status& s) {
  if (s.ok() || s.IsInvalidArgument()) return s;
  return Status::InvalidArgument(s.message());
}

Status AsRunFailure(const Status& s) {
  if (!s.IsInvalidArgument()) return s;
  return Status::Internal(s.message());
}

}  // namespace ctrun::launcher
