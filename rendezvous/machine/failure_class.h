// The class of one failure (`ctrun status --why`, the agent's last line,
// the `finished` event): why a worker or a node failed, decided from the
// evidence ctrun has, never guessed. A failure with too little evidence is
// kUnknown, and its text says what was seen.
//
// The evidence, most telling first (the first that applies decides):
//   1. the node was lost (its stream broke or its keep-alive ran out, no
//      exit reported)                                  -> kNodeLost
//   2. the health check failed                          -> kUnhealthyNode
//   3. the agent found it hung (heartbeat or step time
//      ran out; the saved stack's innermost frame)      -> kHang
//      or too slow for the step's deadline              -> kStragglerTimeout
//   4. its agent stopped it (a restart, a peer failed)  -> kStopped
//   5. the program could not be started (exec failed),
//      or its attempt was a bad launch (IsBadLaunch)   -> kBadLaunch
//   6. SIGKILL with the cgroup's oom_kill count up      -> kOomKilled
//   7. SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE         -> kSegfault, kAbort,
//                                                          kBusError,
//                                                          kIllegalInstruction,
//                                                          kArithmeticError
//      any other signal                                 -> kKilledBySignal
//   8. its error text (the error file's message, else its stderr's last
//      line), most specific first: CUDA out of memory, NCCL, no space left
//      on device (ENOSPC), file not found, an import error, NaN/Inf,
//      a lost connection, then any other exception   -> kCudaOom, kNcclError,
//                                                          kDiskFull,
//                                                          kFileNotFound,
//                                                          kImportError,
//                                                          kNanOrInf,
//                                                          kConnectionError,
//                                                          kPythonException
//   9. nothing of the above                             -> kUnknown
// An exit status of 128 + N with no signal (a shell between the agent and
// the program) counts as signal N.
//
// bad_launch for a whole attempt (every rank failed within
// kBadLaunchWindowS of its start with the same error text) is decided over
// the attempt's failures: IsBadLaunch.
//
// Pure functions, plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctrun::rdzv {

enum class FailureClass {
  kUnknown,
  kNodeLost,
  kUnhealthyNode,
  kHang,
  kStragglerTimeout,
  kStopped,
  kBadLaunch,
  kOomKilled,
  kSegfault,
  kAbort,
  kBusError,
  kIllegalInstruction,
  kArithmeticError,
  kKilledBySignal,
  kCudaOom,
  kNcclError,
  kDiskFull,
  kFileNotFound,
  kImportError,
  kNanOrInf,
  kConnectionError,
  kPythonException,
};

// The class's name in events and JSON: "oom_killed", "disk_full", ...
std::string_view FailureClassName(FailureClass c);
// The name back (nullopt for a name that is not one).
std::optional<FailureClass> ParseFailureClass(std::string_view name);

// A rank that failed within this long of its start, on every rank of an
// attempt with the same error, is a launch that cannot work.
inline constexpr double kBadLaunchWindowS = 1.0;

// What is known of one failure.
struct FailureEvidence {
  int exit_code = 0;  // its exit status; 0 when killed by a signal
  int signal = 0;     // the signal that killed it; 0 when it exited
  // The oom_kill count of its cgroup (memory.events, cgroup v2;
  // memory.oom_control, v1) before it started and after it failed; unset
  // when not readable.
  std::optional<int64_t> oom_kills_before;
  std::optional<int64_t> oom_kills_after;
  std::string error_message;  // the error file's message ("RuntimeError: ...")
  std::string last_line;      // the last non-empty stderr line
  bool node_lost = false;
  bool unhealthy = false;
  std::string health_reason;  // the health check's line
  bool hung = false;
  bool straggler = false;
  std::string hang_frame;  // the saved stack's innermost Python frame ("train.py:42 in step")
  bool stopped_by_agent = false;
  bool exec_failed = false;  // the program could not be started at all
  bool bad_launch = false;   // its attempt was a bad launch (IsBadLaunch over it)
  double runtime_s = -1;     // from its start to its failure; < 0 unknown
  int64_t max_rss_kib = 0;   // its peak resident memory; 0 unknown (named in an OOM kill's text)
};

struct FailureCause {
  FailureClass cls = FailureClass::kUnknown;
  // What decided it, in plain English, for a verdict line: "killed by the
  // kernel's OOM killer (oom_kill 0->1 in its cgroup)".
  std::string text;

  bool operator==(const FailureCause&) const = default;
};

FailureCause ClassifyFailure(const FailureEvidence& evidence);

// The exception type at the head of `message` ("torch.cuda.OutOfMemoryError:
// CUDA out of memory" -> "torch.cuda.OutOfMemoryError"), or "" when it does
// not start with one.
std::string_view ExceptionType(std::string_view message);

// Whether an attempt's failures (one per failed rank, `ranks` the
// attempt's world, at least 2) are a launch that cannot work: every rank
// failed on its own (none stopped by its agent, none by a signal) within
// kBadLaunchWindowS of its start, with the same exit code and the same
// error text (maybe none), of a class no restart fixes (not a lost
// connection, NCCL or a GPU out of memory); or could not be started at
// all (then one rank is enough). The agent lets an attempt's workers run to the end of their first
// kBadLaunchWindowS before it stops them for an early failure, so every
// rank of a bad launch fails on its own.
bool IsBadLaunch(const std::vector<FailureEvidence>& failures, int ranks);

}  // namespace ctrun::rdzv
