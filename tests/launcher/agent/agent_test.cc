// The agent's state machine with a scripted worker group and rendezvous:
// events in (a round completes, a worker exits, the membership changes, a
// signal, the group's close completes), actions out (workers started, Close
// with which signal, the next round asked for, the events file, the exit
// code, how the rendezvous was shut down). The agent's io_context is only
// polled: nothing here waits on time, processes or real signals.
#include "tests/launcher/agent/agent_fixture.h"

#include <signal.h>

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

using namespace agent_testing;

TEST_CASE_METHOD(AgentFixture, "agent: every worker exiting 0 stops the group and succeeds") {
  StartRunning();
  CHECK(workers.starts == 1);
  CHECK(workers.last_specs.size() == 2);
  workers.Exit(0, 0);
  CHECK(agent().state() == Agent::State::kRunning);
  workers.Exit(1, 0);
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
  CHECK(EventsNamed("restart").empty());
  for (const Json& e : Events()) CHECK(e["node_id"] == "node0#7");
}

TEST_CASE_METHOD(AgentFixture, "agent: each worker gets its --numa-binding at every start, and its events name it") {
  config.max_restarts = 1;
  bindings = {WorkerBinding{{0, 1}, {0}, "CPUs 0-1, memory preferred on NUMA node 0 (test)"},
              WorkerBinding{{2, 3}, {1}, "CPUs 2-3, memory preferred on NUMA node 1 (test)"}};
  StartRunning();
  for (int attempt = 0; attempt < 2; ++attempt) {
    REQUIRE(workers.last_specs.size() == 2);
    for (int lr = 0; lr < 2; ++lr) {
      CHECK(workers.last_specs[lr].binding.cpus == bindings[lr].cpus);
      CHECK(workers.last_specs[lr].binding.memory_nodes == bindings[lr].memory_nodes);
    }
    workers.Exit(1, 3);
    workers.FinishClose();
    if (attempt == 0) {
      rdzv.CompleteRound(2);
      Poll();
    }
  }
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  const std::vector<Json> started = EventsNamed("worker_started");
  REQUIRE(started.size() == 4);
  for (const Json& e : started) {
    const int lr = e["local_rank"].get<int>();
    CHECK(e["cpus"].get<std::vector<int>>() == bindings[lr].cpus);
    CHECK(e["memory_nodes"].get<std::vector<int>>() == bindings[lr].memory_nodes);
    CHECK(e["binding"] == bindings[lr].summary);
  }
}

TEST_CASE_METHOD(AgentFixture, "agent: without --numa-binding workers and events carry no binding") {
  StartRunning();
  for (const WorkerSpec& s : workers.last_specs) CHECK(s.binding.cpus.empty());
  for (const Json& e : EventsNamed("worker_started")) CHECK_FALSE(e.contains("cpus"));
}

TEST_CASE_METHOD(AgentFixture, "agent: a failed worker stops the group and restarts it, charged") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(1, 3);
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  CHECK(rdzv.rounds_asked == 1);  // no rendezvous before the group is gone
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(rdzv.rounds_asked == 2);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["cause"] == "worker_failed");
  CHECK(restarts[0]["charged"] == true);
  CHECK(restarts[0]["restart_count"] == 1);
  CHECK(restarts[0]["remaining_restarts"] == 0);

  rdzv.CompleteRound(2);
  Poll();
  CHECK(agent().state() == Agent::State::kRunning);
  CHECK(workers.starts == 2);
  workers.Exit(0, 0);
  workers.Exit(1, 0);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
}

TEST_CASE_METHOD(AgentFixture, "agent: with the restart budget spent, a failed worker fails the run") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(0, 3);
  workers.FinishClose();
  rdzv.CompleteRound(2);
  Poll();
  REQUIRE(workers.starts == 2);
  workers.Exit(0, 3);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(rdzv.rounds_asked == 2);
  CHECK(EventsNamed("restart").size() == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: --exit-code-from-root-cause exits with the failed worker's code") {
  config.exit_code_from_root_cause = true;
  StartRunning();
  workers.Exit(1, 7);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, 7, ShutdownReason::kFailed);
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal during a restart's stop lets it end, then exits for the signal") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(1, 1);
  REQUIRE(agent().state() == Agent::State::kStopping);
  agent().HandleSignal(SIGTERM);
  // The workers keep their SIGTERM and grace (e.g. to checkpoint): no new Close.
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(EventsNamed("restart").empty());
  CHECK(rdzv.rounds_asked == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: a second signal during a stop closes the group again at once") {
  StartRunning();
  agent().HandleSignal(SIGTERM);
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  agent().HandleSignal(SIGINT);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM, SIGINT});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGINT, ShutdownReason::kSignal);
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal while running stops the group with it and exits for it, whatever the workers exit with") {
  config.max_restarts = 3;
  StartRunning();
  agent().HandleSignal(SIGTERM);
  workers.Exit(0, 1);  // dies badly of the SIGTERM
  CHECK(agent().state() == Agent::State::kStopping);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(EventsNamed("restart").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal during the rendezvous exits at once; a late round is ignored") {
  Start();
  REQUIRE(agent().state() == Agent::State::kRendezvous);
  agent().HandleSignal(SIGINT);
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGINT, ShutdownReason::kSignal);
  rdzv.CompleteRound(2);
  CHECK(workers.starts == 0);
}

TEST_CASE_METHOD(AgentFixture, "agent: a lost node (membership changed, charged) stops the group and re-joins") {
  config.max_restarts = 1;
  StartRunning();
  rdzv.ChangeMembership(true, "node n2 was lost");
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(rdzv.rounds_asked == 2);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["cause"] == "membership_changed");
  CHECK(restarts[0]["charged"] == true);
  CHECK(restarts[0]["restart_count"] == 1);
  rdzv.CompleteRound(2);
  Poll();
  CHECK(agent().state() == Agent::State::kRunning);
  CHECK(workers.starts == 2);
}

TEST_CASE_METHOD(AgentFixture, "agent: a scale-up (membership changed, not charged) re-joins without spending the budget") {
  config.max_restarts = 0;
  StartRunning();
  rdzv.ChangeMembership(false, "a node is waiting to join");
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["charged"] == false);
  CHECK(restarts[0]["restart_count"] == 0);
}

TEST_CASE_METHOD(AgentFixture, "agent: a worker failure followed by the peer loss that caused it is not charged") {
  config.max_restarts = 0;
  StartRunning();
  workers.Exit(0, 1);  // the collective broke first
  rdzv.ChangeMembership(false, "node n2 left");
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);  // not failed: nothing was charged
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["cause"] == "membership_changed");
  CHECK(restarts[0]["charged"] == false);
}

TEST_CASE_METHOD(AgentFixture, "agent: membership changes outside kRunning start no stop") {
  Start();
  rdzv.ChangeMembership(true, "early");
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(workers.close_signals.empty());
  CHECK(EventsNamed("membership_changed").size() == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: a failed rendezvous fails the run") {
  Start();
  rdzv.Answer(Status::DeadlineExceeded("join timeout"));
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(EventsNamed("rendezvous_failed").size() == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: workers that cannot start fail the run") {
  workers.start_status = Status::NotFound("cannot run '/nonexistent'");
  Start();
  rdzv.CompleteRound(2);
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(workers.close_signals.empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: the events of one failed-then-restarted round, in order") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(1, 1);
  workers.FinishClose();
  Poll();
  CHECK(EventNames() == std::vector<std::string>{
                            "rendezvous_started", "round_complete", "worker_started",
                            "worker_started", "worker_exited", "worker_exited", "restart",
                            "rendezvous_started"});
  const std::vector<Json> exits = EventsNamed("worker_exited");
  CHECK(exits[0]["during"] == "running");
  CHECK(exits[1]["during"] == "stopping");
  CHECK(exits[1]["signal"] == "SIGTERM");
}

// --- crash-loop policy (--restart-backoff, --fail-fast-on-startup)

TEST_CASE_METHOD(AgentFixture, "agent: fail-fast stops a first attempt that crashed at start-up, budget unspent") {
  config.max_restarts = 3;
  config.fail_fast_on_startup = true;
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitDoNotRequeue, ShutdownReason::kFailed);
  CHECK(rdzv.rounds_asked == 1);
  CHECK(workers.starts == 1);
  CHECK(EventsNamed("restart").empty());
  const std::vector<Json> startup = EventsNamed("startup_failed");
  REQUIRE(startup.size() == 1);
  CHECK(startup[0]["cause"] == "worker_failed");
  CHECK(startup[0]["remaining_restarts"] == 3);
}

TEST_CASE_METHOD(AgentFixture, "agent: fail-fast's code wins over --exit-code-from-root-cause and an empty budget") {
  config.fail_fast_on_startup = true;
  config.exit_code_from_root_cause = true;
  StartRunning();
  workers.Exit(1, 7);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitDoNotRequeue, ShutdownReason::kFailed);
}

TEST_CASE_METHOD(AgentFixture, "agent: without fail-fast the same start-up crash is restarted") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("startup_failed").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: fail-fast never stops a failure the membership caused") {
  config.max_restarts = 0;
  config.fail_fast_on_startup = true;
  StartRunning();
  workers.Exit(0, 1);  // the collective broke first
  rdzv.ChangeMembership(false, "node n2 left");
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("startup_failed").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: after a lost node, a start-up crash is no longer the first attempt's") {
  config.max_restarts = 2;
  config.fail_fast_on_startup = true;
  StartRunning();
  rdzv.ChangeMembership(true, "node n2 was lost");
  workers.FinishClose();
  Poll();
  rdzv.CompleteRound(2);
  Poll();
  REQUIRE(agent().state() == Agent::State::kRunning);
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("restart").size() == 2);
}

TEST_CASE_METHOD(AgentFixture, "agent: with a heartbeat on, a touch is progress and fail-fast restarts") {
  config.max_restarts = 1;
  config.fail_fast_on_startup = true;
  config.heartbeat_timeout = Seconds(3600);
  StartRunning();
  std::string file;
  for (const std::string& e : workers.last_specs[1].env) {
    if (e.rfind("CTRUN_HEARTBEAT_FILE=", 0) == 0) file = e.substr(e.find('=') + 1);
  }
  REQUIRE(!file.empty());
  std::ofstream(file) << "";
  // A touch after the start: the kernel's coarse file times could put a
  // touch made at once a hair before it.
  std::filesystem::last_write_time(file, std::filesystem::file_time_type::clock::now() + std::chrono::hours(1));
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("startup_failed").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: with a heartbeat on and no touch, fail-fast stops") {
  config.max_restarts = 1;
  config.fail_fast_on_startup = true;
  config.heartbeat_timeout = Seconds(3600);
  config.min_healthy_uptime = Seconds(0.000001);  // uptime is not what counts with a heartbeat
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitDoNotRequeue, ShutdownReason::kFailed);
}

TEST_CASE_METHOD(AgentFixture, "agent: --restart-backoff waits in kBackoff; a signal there exits at once") {
  config.max_restarts = 2;
  config.restart_backoff = Seconds(3600);
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kBackoff);
  CHECK(rdzv.rounds_asked == 1);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["delay_s"] == 3600.0);
  rdzv.ChangeMembership(true, "node n2 was lost");  // ignored: no group runs
  CHECK(agent().state() == Agent::State::kBackoff);
  agent().HandleSignal(SIGTERM);
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(rdzv.rounds_asked == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: the backoff's timer begins the next rendezvous") {
  config.max_restarts = 1;
  config.restart_backoff = Seconds(0.001);
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  // The restart went through the backoff (its event says so); its 1 ms
  // timer may already have fired within Poll on a slow machine.
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["delay_s"].get<double>() == Approx(0.001));
  CHECK(rdzv.rounds_asked == 1 + (agent().state() == Agent::State::kRendezvous ? 1 : 0));
  if (agent().state() == Agent::State::kBackoff) {
    // The timer is the only handler that can complete.
    CHECK(io.run_one_for(std::chrono::seconds(60)) == 1);
  }
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(rdzv.rounds_asked == 2);
}

TEST_CASE_METHOD(AgentFixture, "agent: a membership restart is not delayed by the backoff") {
  config.max_restarts = 1;
  config.restart_backoff = Seconds(3600);
  StartRunning();
  rdzv.ChangeMembership(true, "node n2 was lost");
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("restart")[0]["delay_s"] == 0.0);
}

// --- bounded kill (--kill-timeout)

TEST_CASE_METHOD(AgentFixture, "agent: a close that gives up on stuck processes ends the run with 4") {
  config.max_restarts = 3;
  config.kill_timeout = Seconds(7);
  StartRunning();
  workers.Exit(0, 1);
  CHECK(workers.last_kill_timeout == std::chrono::seconds(7));
  workers.GiveUpClose({StuckProcess{1, 1001, true, "python3", "D (uninterruptible sleep)"}});
  Poll();
  CheckFinished(Agent::State::kFailed, kExitWorkersStuck, ShutdownReason::kUnhealthy);
  CHECK(EventsNamed("restart").empty());
  const std::vector<Json> stuck = EventsNamed("workers_stuck");
  REQUIRE(stuck.size() == 1);
  REQUIRE(stuck[0]["processes"].size() == 1);
  CHECK(stuck[0]["processes"][0]["pid"] == 1001);
  CHECK(stuck[0]["processes"][0]["local_rank"] == 1);
  CHECK(stuck[0]["processes"][0]["state"] == "D (uninterruptible sleep)");
}

TEST_CASE_METHOD(AgentFixture, "agent: stuck processes win over the signal that stopped the group") {
  StartRunning();
  agent().HandleSignal(SIGTERM);
  workers.GiveUpClose({StuckProcess{0, 1000, true, "", "unknown"}});
  Poll();
  CheckFinished(Agent::State::kFailed, kExitWorkersStuck, ShutdownReason::kUnhealthy);
}

}  // namespace
}  // namespace ctrun::launcher
