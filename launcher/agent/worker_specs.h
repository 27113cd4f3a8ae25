// Worker specs: what the agent starts for one attempt, decided from the
// command line, the round, the restart count and the run's log directory —
// each worker's argv, environment, stdio targets, binding and stacks file
// (WorkerSpec), and the plan of its output tees (TeePlan). Pure: no I/O, no
// clock (RunLogDir only names paths here).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/config.h"
#include "launcher/logs/log_dir.h"
#include "launcher/process/cpu_binding.h"
#include "launcher/process/worker_env.h"
#include "launcher/process/worker_group.h"
#include "launcher/rdzv/rendezvous_handler.h"

namespace ctrun::launcher {

class LogShipper;  // launcher/logs/ship/log_shipper.h

// Everything an attempt's plan depends on besides the round. Borrows it all.
struct AttemptInputs {
  const LaunchConfig& config;
  const Environment& env;
  const RunLogDir& log_dir;
  int restart_count = 0;
  const std::vector<WorkerBinding>& bindings;  // --numa-binding, per local rank; empty: none
};

// The file a worker writes to ask for this node's exclusion
// (CTRUN_EXCLUDE_NODE_FILE): <run log dir>/exclude_node.
std::string ExcludeNodeFile(const RunLogDir& log_dir);
// Preemption (--preempt-grace; launcher/agent/preemption.h): the notice file
// the workers watch (CTRUN_PREEMPT_FILE), <run log dir>/preempt, and where
// each writes the step it saved (CTRUN_PREEMPT_SAVED_FILE), its rank
// directory's preempt_saved. Both are set in a worker's environment only
// with --preempt-grace.
std::string PreemptNoticeFile(const RunLogDir& log_dir);
std::string PreemptSavedFile(const RunLogDir& log_dir, int restart_count, int local_rank);
// Attempt `restart_count`'s heartbeat file of `local_rank` (in its log directory).
std::string HeartbeatFile(const RunLogDir& log_dir, int restart_count, int local_rank);
// Whether `local_rank`'s output goes to the console (--local-ranks-filter).
bool OnConsole(const LaunchConfig& config, int local_rank);
// --numa-binding's binding of `local_rank`; null: not bound.
const WorkerBinding* BindingOf(const std::vector<WorkerBinding>& bindings, int local_rank);

// The environment every worker of `round` shares.
RoundEnv MakeRoundEnv(const AttemptInputs& in, const Round& round);
// One spec per rank of `ranks` (this node's ranks in `round`), in order.
std::vector<WorkerSpec> MakeWorkerSpecs(const AttemptInputs& in, const Round& round,
                                        const std::vector<WorkerRanks>& ranks);

// One piped stream of one worker, as its tee must handle it: a tee'd stream
// goes to its file and (on a console rank) to the console, prefixed; a
// stream piped only for a filter goes where it would have gone without the
// pipe: its file (--redirects), else the console, unprefixed.
struct TeeStream {
  size_t worker = 0;       // index in the ranks (and in the pipes WorkerGroup::Start gave)
  bool is_stderr = false;  // the pipe's second (stderr) end, else the first (stdout)
  std::string file;        // the log file to write; "" none
  bool to_console = false; // also to ctrun's own stdout (stderr for is_stderr)
  bool prefix_console = false;
  std::string prefix;      // the line prefix (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE)
  int local_rank = 0;      // the worker's (--dedup-logs' "[ranks ...]:" names it)
  int rank = 0;            // its global rank (--share-logs labels its lines with it)
  // Its lines also go to its stream's filtered log, when there is one.
};

struct TeePlan {
  // --duplicate-*-filters: the filters and the files of the attempt's
  // filtered logs (no filters: none).
  std::vector<std::string> stdout_filters, stderr_filters;
  std::string filtered_stdout_file, filtered_stderr_file;
  // --dedup-logs: the console streams' lines go through a ConsoleDedup per
  // console stream (every console stream is then piped).
  bool dedup_logs = false;
  // Their window (LaunchConfig::dedup_window); unset: LineDedup's default.
  std::optional<std::chrono::milliseconds> dedup_window;
  // --share-logs: every piped line also goes to the agent's LogShipper (set
  // by the agent; null: not shared). Every stream is then piped.
  LogShipper* shipper = nullptr;
  // Per worker, its stdout then its stderr; only the streams piped by
  // MakeWorkerSpecs are teed (a pipe of -1 is skipped).
  std::vector<TeeStream> streams;
};

TeePlan MakeTeePlan(const AttemptInputs& in, const std::vector<WorkerRanks>& ranks);

}  // namespace ctrun::launcher
