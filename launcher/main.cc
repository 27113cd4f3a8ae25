// ctrun and ctrun-full: launch and supervise one node's PyTorch workers, as torchrun
// does. Built twice (launcher/CMakeLists.txt): with CTRUN_ONE_NODE_ONLY, the
// one-node `ctrun`, which hands the rest to ctrun-full (launcher/app/handoff.h).
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "base/open_files.h"
#include "launcher/agent/agent.h"
#include "launcher/app/handoff.h"
#include "launcher/health/command_check.h"
#include "launcher/cli/command.h"
#include "launcher/logs/event_log.h"
#include "launcher/cli/config.h"
#include "launcher/logs/log_dir.h"
#include "launcher/cli/nproc.h"
#include "launcher/app/numa_setup.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/rdzv/resolve.h"
#include "launcher/rdzv/setup.h"
#if !CTRUN_ONE_NODE_ONLY
#include "launcher/app/status_command.h"
#endif
#include "rendezvous/store/store_server.h"
#include "launcher/process/worker_env.h"
#include "launcher/process/workers.h"
#include "rendezvous/machine/node_order.h"

namespace {

using namespace ctrun;
using namespace ctrun::launcher;

int UsageError(const Status& s) {
  std::fprintf(stderr, "ctrun: error: %s\n", s.message().c_str());
  return kExitUsage;
}

// LOGLEVEL as torchrun reads it (Python's level names; any case here). Empty
// or unset is info. Anything else is a usage error: torchrun dies on it with
// a ValueError traceback.
Status SetUpLogging(const Environment& env) {
  auto logger = spdlog::stderr_logger_st("ctrun");
  logger->set_pattern("[ctrun] %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::level::level_enum level = spdlog::level::info;
  if (auto it = env.find("LOGLEVEL"); it != env.end() && !it->second.empty()) {
    std::string v = it->second;
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (v == "debug" || v == "notset") level = spdlog::level::debug;
    else if (v == "info") level = spdlog::level::info;
    else if (v == "warning" || v == "warn") level = spdlog::level::warn;
    else if (v == "error") level = spdlog::level::err;
    else if (v == "critical" || v == "fatal") level = spdlog::level::critical;
    else
      return Status::InvalidArgument("LOGLEVEL='" + it->second +
                                     "' is not a log level: set it to DEBUG, INFO, WARNING, ERROR or CRITICAL, or unset it");
  }
  logger->set_level(level);
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  Environment env = CurrentEnvironment();
  if (Status s = SetUpLogging(env); !s.ok()) return UsageError(s);

  std::vector<std::string> args(argv + 1, argv + argc);
  // `ctrun status ...`: a query, not a launch (a script named "status" runs as ./status).
  if (!args.empty() && args[0] == "status") {
#if CTRUN_ONE_NODE_ONLY
    HandOffToFull(argv, "ctrun status");
    return kExitFailure;
#else
    return RunStatusCommand({args.begin() + 1, args.end()}, env);
#endif
  }
  Result<ParsedArgs> parsed = ParseCommandLine(args, env);
  if (!parsed.ok()) return UsageError(parsed.status());
  if (parsed->action != ParseAction::kRun) {
    std::fputs(parsed->text.c_str(), stdout);
    return kExitSuccess;
  }
#if CTRUN_ONE_NODE_ONLY
  // Before the warnings: ctrun-full parses the same line again and says them.
  if (!parsed->config.local_rendezvous()) {
    const LaunchConfig& c = parsed->config;
    const std::string nodes = c.min_nodes == c.max_nodes
                                  ? std::to_string(c.max_nodes)
                                  : std::to_string(c.min_nodes) + ":" + std::to_string(c.max_nodes);
    HandOffToFull(argv, c.is_single_node() ? "a launch with --rdzv-backend c10d and --rdzv-endpoint"
                                           : "a launch of several nodes (--nnodes " + nodes + ")");
    return kExitFailure;
  }
#endif
  for (const std::string& w : parsed->warnings) spdlog::warn("{}", w);
  LaunchConfig config = std::move(parsed->config);
  // After the hand-off, so that ctrun-full sees the limit as the user set it.
  // The store (and a rendezvous here) take one descriptor per connection;
  // the workers get the old limit back.
  const std::optional<struct rlimit> user_nofile = RaiseOpenFilesLimit();

  SystemProbe probe;
  if (Status s = ResolveNprocPerNode(config, probe); !s.ok()) return UsageError(s);
  if (Status s = ResolveCommand(config, env); !s.ok()) return UsageError(s);
  if (config.virtual_local_rank) {
    if (std::string why = CheckVirtualLocalRank(env, config.nproc_per_node); !why.empty()) {
      return UsageError(Status::InvalidArgument(why));
    }
  }

  // --numa-binding: placed and printed before anything starts (no directory, no worker).
  Result<std::vector<WorkerBinding>> bindings = ResolveNumaBinding(config, env);
  if (!bindings.ok()) return UsageError(bindings.status());

  // A usage error, so it comes before anything is made (the guard, the
  // store, the rendezvous, the log directory).
  std::unique_ptr<EventLog> events;
  if (config.events_file) {
    Result<std::unique_ptr<EventLog>> opened =
        EventLog::Open(*config.events_file, config.rdzv_id, rdzv::ToString(ThisNode(config)));
    if (!opened.ok()) return UsageError(opened.status());
    events = std::move(*opened);
  }
  // torchrun's --event-log-handler console: every event on stderr too.
  if (config.event_log_handler == "console") {
    if (events) {
      events->AlsoToStderr();
    } else {
      events = EventLog::ToStderr(config.rdzv_id, rdzv::ToString(ThisNode(config)));
    }
  }

  if (auto banner = OmpNumThreadsWarning(env, config.nproc_per_node)) {
    std::fprintf(stderr, "%s\n", banner->c_str());
    env["OMP_NUM_THREADS"] = "1";
  }

  // The guard is forked first, while ctrun is still single-threaded.
  Result<std::unique_ptr<OrphanGuard>> guard = OrphanGuard::Start();
  if (!guard.ok()) {
    spdlog::error("{}", guard.status().message());
    return kExitFailure;
  }

  boost::asio::io_context io;
  Reaper reaper(io);
  // From here on, every way out of main ends and reaps the guard (~OrphanGuard).
  OrphanGuard* guard_ptr = guard->get();
  reaper.Register(guard_ptr->pid(), [guard_ptr](pid_t, int) {
    guard_ptr->Reaped();
    spdlog::warn("the orphan guard exited; workers will still die with ctrun (PDEATHSIG), "
                 "but their own children may not");
  });

  // The workers' store is bound before any rendezvous or worker: a port
  // that is taken fails the launch here, once, and never a restart.
  StoreHosting hosting;
  hosting.agent_store = !config.no_agent_store;
  std::unique_ptr<rdzv::StoreServer> store;
  if (std::optional<int> port = AgentStorePort(config)) {
    store = std::make_unique<rdzv::StoreServer>(io);
    if (Status s = store->Listen(AgentStoreHost(config), *port); !s.ok()) {
      if (s.IsInvalidArgument()) return UsageError(s);
      spdlog::error("{}", s.message());
      return kExitFailure;
    }
    hosting.port = store->port();
    spdlog::debug("hosting the workers' store on port {}", store->port());
  }
  Result<std::unique_ptr<RendezvousHandler>> rdzv = MakeRendezvous(io, config, env, hosting);
  if (!rdzv.ok()) {
    if (rdzv.status().IsInvalidArgument()) return UsageError(rdzv.status());
    spdlog::error("{}", rdzv.status().message());
    return kExitFailure;
  }
  Result<RunLogDir> log_dir = RunLogDir::Create(config.log_dir, config.rdzv_id);
  if (!log_dir.ok()) return UsageError(log_dir.status());
  WorkerSet workers(io, reaper, guard->get());
  // --health-check runs in a process group of its own, never the workers'.
  WorkerSet health_runner(io, reaper, guard->get());
  if (user_nofile) {
    workers.SetChildOpenFilesLimit(*user_nofile);
    health_runner.SetChildOpenFilesLimit(*user_nofile);
  }
  std::unique_ptr<CommandHealthCheck> health;
  if (config.health_check) {
    Environment check_env = env;
    check_env["CTRUN_LOG_DIR"] = log_dir->path();  // scripts/health-check.sh tests that it is writable
    health = std::make_unique<CommandHealthCheck>(
        io, health_runner, *config.health_check,
        std::chrono::duration_cast<Duration>(config.health_check_timeout), ToEnvStrings(check_env));
  }
  Agent agent(io, config, env, **rdzv, workers, std::move(*log_dir), store.get(), events.get());
  agent.SetWorkerBindings(std::move(*bindings));
  agent.SetHealthCheck(health.get());
  agent.Start();
  io.run();
  (*guard)->HandOverAtExit();
  (*guard)->Stop();  // ctrun never exits before its guard
  return agent.exit_code();
}
