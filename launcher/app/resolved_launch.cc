#include "launcher/app/resolved_launch.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <utility>

#include "base/open_files.h"
#include "launcher/app/exit_on_failure.h"
#include "launcher/app/numa_setup.h"
#include "launcher/cli/command.h"
#include "launcher/cli/nproc.h"
#include "launcher/process/worker_env.h"
#include "launcher/rdzv/resolve.h"
#include "rendezvous/machine/node_order.h"

namespace ctrun::launcher {
namespace {

// How many workers, and what they run.
Status ResolveWorkers(LaunchConfig& config, const Environment& env) {
  SystemProbe probe;
  CTRUN_RETURN_IF_ERROR(ResolveNprocPerNode(config, probe));
  CTRUN_RETURN_IF_ERROR(ResolveCommand(config, env));
  if (config.virtual_local_rank) {
    if (std::string why = CheckVirtualLocalRank(env, config.nproc_per_node); !why.empty()) {
      return Status::InvalidArgument(why);
    }
  }
  return Status::Ok();
}

// --events-file, and torchrun's --event-log-handler console: every event on
// stderr too. Null with neither.
Result<std::unique_ptr<EventLog>> OpenEventLog(const LaunchConfig& config) {
  std::unique_ptr<EventLog> events;
  if (config.events_file) {
    Result<std::unique_ptr<EventLog>> opened =
        EventLog::Open(*config.events_file, config.rdzv_id, rdzv::ToString(ThisNode(config)));
    if (!opened.ok()) return opened.status();
    events = std::move(*opened);
  }
  if (config.event_log_handler == "console") {
    if (events) {
      events->AlsoToStderr();
    } else {
      events = EventLog::ToStderr(config.rdzv_id, rdzv::ToString(ThisNode(config)));
    }
  }
  return events;
}

}  // namespace

Result<ResolvedLaunch> ResolveLaunch(ParsedArgs parsed, Environment env) {
  for (const std::string& w : parsed.warnings) spdlog::warn("{}", w);
  ResolvedLaunch launch;
  launch.config = std::move(parsed.config);
  launch.env = std::move(env);
  const LaunchConfig& config = launch.config;
  // After the hand-off, so that ctrun-full sees the limit as the user set it.
  // The store (and a rendezvous here) take one descriptor per connection;
  // the workers get the old limit back.
  launch.user_nofile = RaiseOpenFilesLimit();

  if (Status s = ResolveWorkers(launch.config, launch.env); !s.ok()) return AsUsageError(s);

  // --numa-binding: placed and printed before anything starts (no directory, no worker).
  Result<std::vector<WorkerBinding>> bindings = ResolveNumaBinding(config, launch.env);
  if (!bindings.ok()) return AsUsageError(bindings.status());
  launch.bindings = std::move(*bindings);

  // A usage error, so it comes before anything is made (the guard, the
  // store, the rendezvous, the log directory).
  Result<std::unique_ptr<EventLog>> events = OpenEventLog(config);
  if (!events.ok()) return AsUsageError(events.status());
  launch.events = std::move(*events);

  if (auto banner = OmpNumThreadsWarning(launch.env, config.nproc_per_node)) {
    std::fprintf(stderr, "%s\n", banner->c_str());
    launch.env["OMP_NUM_THREADS"] = std::string("1");  // not = "1": g++ 12 -Wrestrict false positive
  }
  return launch;
}

}  // namespace ctrun::launcher
