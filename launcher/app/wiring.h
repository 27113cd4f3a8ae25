// The wiring of one ctrun run: its object graph, built from a ResolvedLaunch
// (resolved_launch.h) in three steps (Start, Wire, Run) and run to its end.
// Wiring owns every piece, in the order they are made and destroyed in
// reverse:
//   the ResolvedLaunch   config, environment, events log: outlive all below
//                        (the Agent keeps a reference to the config)
//   the orphan guard     forked first, while ctrun is single-threaded; the
//                        last thing ended (~OrphanGuard stops and reaps it)
//   the io_context and its Reaper
//   the workers' store   bound before any rendezvous or worker (AgentStorePort)
//   the rendezvous       MakeRendezvous (launcher/rdzv/setup.h): the program's
//                        link decides which (ctrun: one node only)
//   two WorkerSets       the workers', and the --health-check's (a process
//                        group of its own, never the workers')
//   the health check     --health-check, or none
//   fault tolerance      --ft-replicas: the quorum server's link and the
//                        workers' relay (launcher/ft/ft_setup.h), or none
//   the Agent            borrows all of the above; destroyed first
// The run's log directory is made after the rendezvous and moved into the
// Agent. A step that fails leaves the graph as far as it got: main reports
// the failure (exit_on_failure.h), then destroys it, the guard last.
// Thread model: main thread; Run drives the one Asio loop.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "base/result.h"
#include "launcher/agent/agent.h"
#include "launcher/app/resolved_launch.h"
#include "launcher/ft/ft_setup.h"
#include "launcher/health/command_check.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/process/workers.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "rendezvous/store/store_server.h"

namespace ctrun::launcher {

class Wiring {
 public:
  // Starts the orphan guard, then makes the loop and its Reaper, and the
  // two WorkerSets. From here on, every way out ends and reaps the guard
  // (~OrphanGuard). Errors: the guard cannot start (a failure at run time,
  // never InvalidArgument).
  static Result<std::unique_ptr<Wiring>> Start(ResolvedLaunch launch);

  // Builds the rest in the order above: the store, the rendezvous, the log
  // directory, the health check, fault tolerance, the Agent. Call once, after Start. Errors,
  // each with its message as it is: InvalidArgument (a usage error) for a
  // store address or rendezvous configuration that is wrong, and for a log
  // directory that cannot be made; any other code for a failure at run time
  // (the store's port is taken, the rendezvous cannot be reached).
  Status Wire();

  ~Wiring();
  Wiring(const Wiring&) = delete;
  Wiring& operator=(const Wiring&) = delete;

  // Starts the Agent, runs the loop until the Agent is done, then hands the
  // workers' groups over to the guard and waits for it to end (ctrun never
  // exits before its guard). Returns the Agent's exit code. Call once,
  // after Wire succeeded.
  int Run();

 private:
  Wiring(ResolvedLaunch launch, std::unique_ptr<OrphanGuard> guard);

  Status HostStore(StoreHosting& hosting);
  Status MakeRendezvousHandler(const StoreHosting& hosting);
  Status StartFt();
  Status MakeAgent();

  // Declared in the order of the header comment: destroyed in reverse.
  ResolvedLaunch launch_;
  std::unique_ptr<OrphanGuard> guard_;
  boost::asio::io_context io_;
  Reaper reaper_;
  std::unique_ptr<rdzv::StoreServer> store_;  // null: this node hosts no store
  std::unique_ptr<RendezvousHandler> rdzv_;
  WorkerSet workers_;
  WorkerSet health_runner_;
  std::unique_ptr<CommandHealthCheck> health_;  // null without --health-check
  std::unique_ptr<FtRuntime> ft_;                // null without --ft-replicas
  std::unique_ptr<Agent> agent_;
};

}  // namespace ctrun::launcher
