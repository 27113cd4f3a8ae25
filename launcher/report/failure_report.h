// The agent's failure reporting: the record of one failed worker (its exit,
// its error file, its saved stacks' innermost frame), the run's final
// failure report and exit code, and the texts of the two unhealthy ends
// (a node that leaves the job; processes that outlived SIGKILL).
//
// The decisions are pure functions of their arguments; ReadWorkerFailure
// reads the worker's two files, ReportStuck logs and writes an event.
// Thread model: any thread; no shared state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/logs/event_log.h"
#include "launcher/report/report.h"
#include "launcher/process/cpu_binding.h"
#include "launcher/process/worker_group.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "rendezvous/machine/failure_record.h"

namespace ctrun::launcher {

// A failed worker's record from its exit alone: no error file, no stacks.
WorkerFailure FailureOf(const WorkerExit& exit, int rank, const WorkerBinding* binding);
// The report's stacks field for a worker whose stacks were saved at
// `stacks_file` (before it was killed for a hang) with text `stacks_text`:
// the path, and the innermost frame when the text names one.
std::string StacksField(const std::string& stacks_file, const std::string& stacks_text);
// FailureOf, completed from what the worker left: its stacks file (when
// there is one) and its error file (when it wrote one; an unreadable or bad
// one is a warning).
WorkerFailure ReadWorkerFailure(const WorkerExit& exit, int rank, const WorkerBinding* binding,
                                const std::string& stacks_file, const std::string& error_file);

// What the agent knows of a recorded failure besides its WorkerFailure, for
// the rendezvous' failure report (`ctrun status --why`).
struct FailureContext {
  // The worker exited while the agent was stopping the group (it had
  // signalled it: a restart, a peer's failure).
  bool stopped_by_agent = false;
  double seen_at_unix_s = 0;  // when the agent saw the exit (sub-second)
  // Its last stderr lines, oldest first, when the agent piped its stderr
  // (AttemptTees::StderrTail); empty otherwise.
  std::vector<std::string> stderr_tail{};
  // The evidence for its class (rendezvous/machine/failure_class.h): its
  // memory cgroup's oom_kill count when the group started and when its exit
  // was seen (nullopt unreadable), its run time, its peak RSS (0 unknown),
  // whether the agent killed it for a missed heartbeat, and the steps it
  // finished (heartbeat touches; nullopt unknown: not reported).
  std::optional<int64_t> oom_kills_before{};
  std::optional<int64_t> oom_kills_after{};
  double runtime_s = -1;
  int64_t max_rss_kib = 0;
  bool hung = false;
  std::optional<uint64_t> steps{};
};

// The rendezvous' record of `failure` (pure): rank, exit code or signal,
// the context's evidence (hang_frame: the stacks' innermost frame),
// error_message = the error file's message, first line; last_line = its
// traceback's last non-empty line. With no error file (a script without
// @record), from context.stderr_tail instead (from_stderr): last_line = its
// last non-empty line, error_message = the last line that reads as a Python
// exception ("ValueError: ...", "torch.distributed.DistBackendError: ...")
// or "" when none does. stacks_file = the report's stacks field;
// each text cut to its bound (failure_record.h) on a UTF-8 boundary.
// failed_at_unix_s: `error_file_mtime` (when the worker wrote its error
// file: sub-second) when it is within 2 s of the file's timestamp, else
// that timestamp; without a file, context.seen_at_unix_s (else the whole
// second observed_at_s).
rdzv::WorkerFailureInfo FailureInfoOf(const WorkerFailure& failure, const FailureContext& context,
                                      std::optional<double> error_file_mtime);
// The report of one failed attempt: FailureInfoOf for each failure (with
// its context, by index; a missing one is empty) and its error file's
// modification time, read here.
RendezvousHandler::FailureReport FailureReportOf(int round, const std::string& host,
                                                 const std::vector<WorkerFailure>& failures,
                                                 const std::vector<FailureContext>& contexts);

// This node's verdict on its own failures of one attempt (the report
// FailureReportOf made; verdict_line.h): its host names the node.
std::optional<rdzv::VerdictSummary> LocalVerdict(const RendezvousHandler::FailureReport& report);

// The failures of an exec that failed (`error`: WorkerSet::Start's message)
// for every local rank of `ranks`: a bad launch's records, each could not
// be started (exit 127), seen at `now_unix_s`.
RendezvousHandler::FailureReport ExecFailureReport(int round, const std::string& host,
                                                   const std::vector<int>& ranks, const std::string& error,
                                                   double now_unix_s);

// A root cause's own exit code (--exit-code-from-root-cause): its exit
// status, or 128+N for a death by signal N.
int RootCauseExitCode(const WorkerFailure& failure);

// How a failed run ends.
struct FailureOutcome {
  std::optional<size_t> root;  // index of the root cause in the failures; nullopt: none seen
  std::string report;          // the ChildFailedError text for stderr; "" without failures
  int exit_code = 1;
};
// The outcome of a run that failed with `failures` (maybe none: a worker
// failure after a signal is not recorded). `forced_code` (fail-fast) wins;
// else --exit-code-from-root-cause's code, else kExitFailure. `name` is the
// entrypoint's name (EntrypointName), `host` the agent's.
FailureOutcome DecideFailure(const std::vector<WorkerFailure>& failures, const std::string& name,
                             const std::string& host, bool exit_code_from_root_cause,
                             std::optional<int> forced_code);
// DecideFailure's exit code without a forced one, and without the report's
// text: the root cause's own code with --exit-code-from-root-cause, else
// kExitFailure.
int FailureExitCode(const std::vector<WorkerFailure>& failures, bool exit_code_from_root_cause);

// The block on stderr of a node that leaves the job as unhealthy: the host,
// the report's lines indented, the exit code.
std::string FormatUnhealthyBlock(const std::string& host, const std::string& report);

// The report a node whose workers outlived SIGKILL leaves the rendezvous with.
std::string StuckReport(const std::vector<StuckProcess>& stuck);
// Says which processes outlived SIGKILL by --kill-timeout (`kill_timeout_s`),
// on stderr and in a "workers_stuck" event (`events` null: none).
void ReportStuck(const std::vector<StuckProcess>& stuck, double kill_timeout_s, EventLog* events);

}  // namespace ctrun::launcher
