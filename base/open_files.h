// The open-files limit of a process that serves many connections: ctrun's
// store (one per worker of the job: 4,096 ranks need more than Linux's
// default soft limit of 1,024) and ctrund (one per agent).
#pragma once

#include <sys/resource.h>

#include <optional>

namespace ctrun {

// Raises this process's soft RLIMIT_NOFILE to its hard limit, as Go's
// runtime does, and returns the limit as it was: what the processes it
// starts should get back, so that they see what they would have seen
// without it (a worker that select()s on its fds still can). nullopt when
// nothing changed: the soft limit was the hard one already, or getrlimit or
// setrlimit refused. Call it once, at start.
std::optional<struct rlimit> RaiseOpenFilesLimit();

}  // namespace ctrun
