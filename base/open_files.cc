#include "base/open_files.h"

namespace ctrun {

std::optional<struct rlimit> RaiseOpenFilesLimit() {
  struct rlimit old {};
  if (::getrlimit(RLIMIT_NOFILE, &old) != 0 || old.rlim_cur >= old.rlim_max) return std::nullopt;
  struct rlimit raised = old;
  raised.rlim_cur = old.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) return std::nullopt;
  return old;
}

}  // namespace ctrun
