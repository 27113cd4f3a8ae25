// The failure report torchrun prints when workers fail and no restarts are
// left: the text of torch's ChildFailedError (torch 1.13
// errors/__init__.py, format_msg and ProcessFailure), and the choice of the
// root cause. Pure functions over plain data (the only outside input is the
// time zone database when formatting local time); thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/report/error_file.h"

namespace ctrun::launcher {

// One failed (or terminated) worker of the local group, as observed.
struct WorkerFailure {
  int local_rank = 0;
  int rank = 0;               // global rank
  int exit_code = 0;          // negative = killed by signal -exit_code
  int pid = 0;
  std::string error_file;     // the TORCHELASTIC_ERROR_FILE it was given, or ""
  std::optional<ErrorFileData> error;  // its parsed file; nullopt when none was written
  int64_t observed_at_s = 0;  // epoch seconds the exit was seen; used when no file timestamp
  std::string binding;        // --numa-binding: its CPUs and memory in words; "" when not bound
  std::string stacks;         // hang forensics: "<file> (innermost frame: <frame>)"; "" when none
  std::string stacks_frame;   // hang forensics: the innermost frame alone; "" when none
};

// The failure's time in epoch seconds: its error file's timestamp when there
// is one, else observed_at_s.
int64_t FailureTimestamp(const WorkerFailure& failure);

// Returns the index of the root cause: the smallest FailureTimestamp, ties to
// the first in the list. Returns 0 for an empty list (there is no root cause;
// callers must not report an empty list).
size_t ChooseRootCause(const std::vector<WorkerFailure>& failures);

// Python's signal.Signals(n).name on Linux ("SIGTERM", "SIGABRT", "SIGIO",
// "SIGRTMIN", "SIGRTMAX"); "SIGRTMIN+k" for other real-time signals and
// "SIG<n>" for numbers Linux does not define (where torch would crash).
std::string SignalName(int signum);

// The report's traceback field for one failure, before indentation:
//  - structured error file: its py_callstack, else its message, else "<N/A>";
//  - flat error file: its message;
//  - no file (or an empty flat message): "Signal 15 (SIGTERM) received by
//    PID 1234" for a signal death, else "To enable traceback see:
//    https://pytorch.org/docs/stable/elastic/errors.html".
std::string FailureMessage(const WorkerFailure& failure);

// The error data torchrun's own @record would propagate for `failure`: its
// parsed file when it has one, else data with message = FailureMessage,
// timestamp = observed_at_s and empty raw_json (for WriteAgentErrorFile).
ErrorFileData RootCauseErrorData(const WorkerFailure& failure);

// The report's name: torch's _get_entrypoint_name. For a Python launch
// (entrypoint == python_exec) the first argument not starting with '-' (the
// script or module; "" if none), else the entrypoint itself.
std::string EntrypointName(const std::string& entrypoint,
                           const std::vector<std::string>& args,
                           const std::string& python_exec);

enum class ReportTimeZone { kLocal, kUtc };

// Returns the exact ChildFailedError text. Like torch's it starts with "\n"
// and has no trailing newline:
//   \n
//   ====== (width = min(60, widest line of the title and all entries))
//   <name> FAILED
//   ------
//   Failures:
//   [i]: entries of every failure but the root cause, in list order, or
//     "  <NO_OTHER_FAILURES>"
//   ------
//   Root Cause (first observed failure):
//   [r]: the root cause's entry
//   ======
// [i] is the failure's index in `failures`. Each entry has the fields time
// ("%Y-%m-%d_%H:%M:%S" of FailureTimestamp, in `tz`), host, rank
// ("<rank> (local_rank: <local_rank>)"), exitcode ("<code> (pid: <pid>)"),
// binding (only for a worker with a --numa-binding; not in torch's text),
// stacks (only for a worker whose stacks were saved before it was killed
// for a hang; not in torch's text), error_file (the path when the file was read, else "<N/A>") and traceback
// (FailureMessage; for a structured file every newline is followed by two
// spaces of indentation).
// `root_cause` must index `failures` (normally ChooseRootCause's answer);
// `failures` must not be empty. `host` is the agent's FQDN.
std::string FormatFailureReport(const std::string& name, const std::string& host,
                                const std::vector<WorkerFailure>& failures,
                                size_t root_cause,
                                ReportTimeZone tz = ReportTimeZone::kLocal);

}  // namespace ctrun::launcher
