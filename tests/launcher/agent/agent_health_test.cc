// The agent and node health: the check before every join and while the
// workers run, a worker's exclusion request, the unhealthy leave (exit 4),
// signals during it, the run closed for the unhealthy budget (exit 5). The
// same scripted fakes as agent_test.cc (agent_fixture.h).
#include "tests/launcher/agent/agent_fixture.h"

#include <signal.h>

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

using namespace agent_testing;

// ---- Node health (--health-check, CTRUN_EXCLUDE_NODE_FILE) ----------------

std::string EnvValue(const WorkerSpec& spec, const std::string& key) {
  for (const std::string& kv : spec.env) {
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "";
}

TEST_CASE_METHOD(AgentFixture, "agent: the health check runs before every join; a pass joins") {
  FakeHealth check;
  health = &check;
  Start();
  CHECK(check.runs == 1);
  CHECK(rdzv.rounds_asked == 0);  // no join before the check passed
  check.Answer(true);
  Poll();
  CHECK(rdzv.rounds_asked == 1);
  rdzv.CompleteRound(2);
  Poll();
  REQUIRE(agent().state() == Agent::State::kRunning);
  rdzv.ChangeMembership(/*charged=*/false, "node joined");
  workers.FinishClose();
  Poll();
  CHECK(check.runs == 2);  // again before the next round's join
  CHECK(rdzv.rounds_asked == 1);
  check.Answer(true);
  Poll();
  CHECK(rdzv.rounds_asked == 2);
}

TEST_CASE_METHOD(AgentFixture, "agent: a failed health check before the join leaves as unhealthy with exit 4") {
  FakeHealth check;
  health = &check;
  Start();
  check.Answer(false, {"GPU 3: uncorrectable ECC error"});
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.rounds_asked == 0);
  CHECK(rdzv.unhealthy_report == "health check 'check.sh' exited with 1\n  GPU 3: uncorrectable ECC error");
  const std::vector<Json> ev = EventsNamed("node_unhealthy");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]["source"] == "health_check");
  CHECK(ev[0]["during"] == "rendezvous");
  CHECK(ev[0]["last_lines"] == Json::array({"GPU 3: uncorrectable ECC error"}));
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal during the pre-join check cancels it") {
  FakeHealth check;
  health = &check;
  Start();
  agent().HandleSignal(SIGTERM);
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(check.cancels == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: with an interval the check runs while the workers run; a failure stops them and leaves") {
  FakeHealth check;
  StartRunningWithPeriodicCheck(check);
  check.Answer(true);  // healthy: armed again
  RunUntil([&] { return check.pending(); });
  CHECK(check.runs == 3);
  check.Answer(false, {"disk full"});
  Poll();
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "health check 'check.sh' exited with 1\n  disk full");
  const std::vector<Json> ev = EventsNamed("node_unhealthy");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]["during"] == "running");
  CHECK(EventsNamed("restart").empty());  // the node leaves; it does not restart
}

TEST_CASE_METHOD(AgentFixture, "agent: a worker's exclusion request stops the group and leaves as unhealthy") {
  StartRunning();
  const std::string file = agent().ExcludeNodeFile();
  CHECK(EnvValue(workers.last_specs.at(0), "CTRUN_EXCLUDE_NODE_FILE") == file);
  std::ofstream(file) << "NIC eth1 flapping\n";
  RunUntil([&] { return agent().state() == Agent::State::kStopping; });
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report ==
        "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): NIC eth1 flapping");
  const std::vector<Json> ev = EventsNamed("node_unhealthy");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]["source"] == "exclusion_request");
}

TEST_CASE_METHOD(AgentFixture, "agent: a worker that writes its request and exits 1 excludes the node, not a restart") {
  config.max_restarts = 3;
  StartRunning();
  std::ofstream(agent().ExcludeNodeFile()) << "GPU lost\n";
  workers.Exit(0, 1);  // seen before the inotify event: the exit checks the file
  CHECK(agent().state() == Agent::State::kStopping);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(EventsNamed("restart").empty());
}

// A signal while the node leaves as unhealthy: the node still leaves with
// its report and exit 4 (docs/exit-codes.md: 4 wins over 128+N).
TEST_CASE_METHOD(AgentFixture, "agent: a signal while leaving unhealthy keeps exit 4 and the report") {
  config.max_restarts = 3;
  StartRunning();
  std::ofstream(agent().ExcludeNodeFile()) << "GPU lost\n";
  workers.Exit(0, 1);  // the exit checks the file: the stop is the node's exclusion
  REQUIRE(agent().state() == Agent::State::kStopping);
  agent().HandleSignal(SIGTERM);
  // The workers keep their SIGTERM's grace: no new Close.
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): GPU lost");
  CHECK(EventsNamed("node_unhealthy").size() == 1);
  CHECK(EventsNamed("signal").size() == 1);
  CHECK(EventsNamed("restart").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: a failed periodic check then two signals: SIGKILL now, still exit 4") {
  FakeHealth check;
  StartRunningWithPeriodicCheck(check);
  check.Answer(false, {"disk full"});
  Poll();
  REQUIRE(agent().state() == Agent::State::kStopping);
  agent().HandleSignal(SIGINT);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  agent().HandleSignal(SIGINT);  // the second: the group is closed again at once
  CHECK(workers.close_signals == std::vector<int>{SIGTERM, SIGINT});
  CHECK(agent().state() == Agent::State::kStopping);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "health check 'check.sh' exited with 1\n  disk full");
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal during the unhealthy leave changes nothing") {
  StartRunning();
  std::ofstream(agent().ExcludeNodeFile()) << "NIC down\n";
  workers.Exit(1, 1);
  REQUIRE(agent().state() == Agent::State::kStopping);
  rdzv.hold_shutdown = true;
  workers.FinishClose();  // the leave has begun, and is held
  Poll();
  CHECK(agent().state() == Agent::State::kFailed);
  CHECK(agent().exit_code() == kExitNodeUnhealthy);
  REQUIRE(rdzv.leaving());
  agent().HandleSignal(SIGTERM);
  agent().HandleSignal(SIGTERM);
  Poll();
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  CHECK(agent().exit_code() == kExitNodeUnhealthy);
  rdzv.FinishLeave();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): NIC down");
}

TEST_CASE_METHOD(AgentFixture, "agent: a stale exclusion request does not survive into a new group") {
  Start();
  std::filesystem::create_directories(std::filesystem::path(agent().ExcludeNodeFile()).parent_path());
  std::ofstream(agent().ExcludeNodeFile()) << "old\n";
  rdzv.CompleteRound(2);
  Poll();
  CHECK(agent().state() == Agent::State::kRunning);
  CHECK_FALSE(std::filesystem::exists(agent().ExcludeNodeFile()));
}

TEST_CASE_METHOD(AgentFixture, "agent: a run closed for the unhealthy budget exits 5") {
  Start();
  rdzv.Answer(Status::ResourceExhausted("2 nodes left the job as unhealthy"));
  Poll();
  CheckFinished(Agent::State::kFailed, kExitUnhealthyBudget, ShutdownReason::kFailed);
  CHECK(EventsNamed("unhealthy_budget_exceeded").size() == 1);
}

}  // namespace
}  // namespace ctrun::launcher
