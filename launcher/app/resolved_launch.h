// The launch as main has parsed and resolved it, before anything is made:
// the LaunchConfig with its nproc and command resolved, the environment the
// workers start from, the user's open-files limit, the --numa-binding
// placement and the events log. Everything here is a usage error when it
// fails (exit 2: nothing started, no guard, no store, no directory, no
// worker). Next: Wiring (wiring.h) builds the object graph
// from it. Thread model: main thread, before any other starts.
#pragma once

#include <sys/resource.h>

#include <memory>
#include <optional>
#include <vector>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/logs/event_log.h"
#include "launcher/process/cpu_binding.h"

namespace ctrun::launcher {

// Move-only (it owns the events log).
struct ResolvedLaunch {
  LaunchConfig config;  // nproc_per_node and the command resolved
  // ctrun's environment, OMP_NUM_THREADS=1 where the workers need the
  // default torchrun sets (OmpNumThreadsWarning).
  Environment env;
  // The open-files limit as the user set it, before ctrun raised its own;
  // the workers and the health check get it back. None when left as it was.
  std::optional<struct rlimit> user_nofile;
  std::vector<WorkerBinding> bindings;  // --numa-binding: one per local rank, or none
  // --events-file and --event-log-handler console; null with neither.
  std::unique_ptr<EventLog> events;
};

// Says `parsed`'s warnings, raises this process's open-files limit, then
// resolves the launch in the order the user sees it: nproc per node, the
// command, --virtual-local-rank's check, --numa-binding (printed, one line
// per local rank), the events log, the OMP_NUM_THREADS banner. `parsed` is a
// kRun; in the one-node ctrun, one of a local rendezvous (main hands the rest
// to ctrun-full before this). Errors: InvalidArgument (a usage error), with
// the message of the step that failed.
Result<ResolvedLaunch> ResolveLaunch(ParsedArgs parsed, Environment env);

}  // namespace ctrun::launcher
