// The agent's verdict on a failed end and a peer's failure
// (--kill-on-bad-exit): launcher/agent/agent_machine.h's diagram, driven through the
// fakes of agent_fixture.h.
#include <signal.h>

#include "tests/launcher/agent/agent_fixture.h"

namespace ctrun::launcher {
namespace {

using agent_testing::AgentFixture;
using agent_testing::Json;

rdzv::VerdictSummary PeerVerdict() {
  rdzv::VerdictSummary v;
  v.cls = rdzv::FailureClass::kSegfault;
  v.rank = 3;
  v.node = "node-b#42";
  v.host = "node-b";
  v.evidence = "crashed with a segmentation fault (SIGSEGV)";
  v.line = "verdict: rank 3 on node-b crashed with a segmentation fault (SIGSEGV); 1 other rank failed after it "
           "(stopped by its agent)";
  return v;
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: a failed end names its cause in the finished event and the leave") {
  StartRunning();
  workers.Exit(1, -SIGSEGV);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  REQUIRE(rdzv.reports.size() == 1);
  REQUIRE(rdzv.reports[0].failures.size() == 2);
  CHECK(rdzv.reports[0].failures[0].signal == SIGSEGV);
  CHECK(rdzv.reports[0].failures[0].runtime_s >= 0);
  CHECK(rdzv.reports[0].failures[1].stopped_by_agent);
  REQUIRE(rdzv.left_verdict);
  CHECK(rdzv.left_verdict->cls == rdzv::FailureClass::kSegfault);
  CHECK(rdzv.left_verdict->rank == 1);
  const Json finished = EventsNamed("finished").at(0);
  CHECK(finished["cause_class"] == "segfault");
  CHECK(finished["cause_rank"] == 1);
  CHECK(finished["verdict"] == rdzv.left_verdict->line);
  CHECK(finished["evidence"] == "crashed with a segmentation fault (SIGSEGV)");
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: another node's failure stops the workers within 1 s and ends with its verdict") {
  StartRunning();
  rdzv.FailRun(PeerVerdict());
  REQUIRE(workers.close_signals == std::vector<int>{SIGTERM});
  CHECK(workers.last_grace == std::chrono::seconds(1));
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(rdzv.rounds_asked == 1);
  CHECK(EventsNamed("peer_failed").size() == 1);
  const Json finished = EventsNamed("finished").at(0);
  CHECK(finished["cause_class"] == "segfault");
  CHECK(finished["cause_rank"] == 3);
  CHECK(finished["cause_host"] == "node-b");
  CHECK(finished["verdict"] == PeerVerdict().line);
  // Its own stopped workers are reported, as consequences.
  REQUIRE(rdzv.reports.size() == 1);
  CHECK(rdzv.reports[0].failures.at(0).stopped_by_agent);
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: --kill-on-bad-exit 0 runs on as torchrun does") {
  config.kill_on_bad_exit = false;
  StartRunning();
  rdzv.FailRun(PeerVerdict());
  CHECK(workers.close_signals.empty());
  CHECK(agent().state() == Agent::State::kRunning);
  workers.Exit(0, 0);
  workers.Exit(1, 0);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: a restart under way ends with the peer's failure instead") {
  config.max_restarts = 2;
  StartRunning();
  workers.Exit(0, 1);  // its own failure first: a restart begins
  REQUIRE(agent().state() == Agent::State::kStopping);
  rdzv.FailRun(PeerVerdict());
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(rdzv.rounds_asked == 1);  // never joined the closed run again
  CHECK(EventsNamed("finished").at(0)["verdict"] == PeerVerdict().line);
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: a peer's failure during the backoff ends the job at once") {
  config.max_restarts = 2;
  config.restart_backoff = Seconds(60);
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  REQUIRE(agent().state() == Agent::State::kBackoff);
  rdzv.FailRun(std::nullopt);  // a peer that sent no verdict: this node's own
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(EventsNamed("finished").at(0)["cause_rank"] == 0);
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: workers that cannot be started are a bad launch") {
  workers.start_status = Status::NotFound("cannot run '/nonexistent': No such file or directory");
  Start();
  rdzv.CompleteRound(2);
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  REQUIRE(rdzv.reports.size() == 1);
  REQUIRE(rdzv.reports[0].failures.size() == 2);
  CHECK(rdzv.reports[0].failures[1].exec_failed);
  CHECK(rdzv.reports[0].failures[1].rank == 1);
  REQUIRE(rdzv.left_verdict);
  CHECK(rdzv.left_verdict->cls == rdzv::FailureClass::kBadLaunch);
  CHECK(EventsNamed("finished").at(0)["cause_class"] == "bad_launch");
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: a signal ends the job with no verdict") {
  StartRunning();
  agent().HandleSignal(SIGTERM);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK_FALSE(EventsNamed("finished").at(0).contains("cause_class"));
  CHECK_FALSE(rdzv.left_verdict);
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: every rank failing early the same way is a bad launch, not restarted") {
  config.max_restarts = 3;
  launch_window = std::chrono::seconds(60);  // the test's exits all come within it
  StartRunning();
  workers.Exit(0, 1);
  CHECK(workers.close_signals.empty());  // the others may still fail the same way
  workers.Exit(1, 1);
  REQUIRE(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitDoNotRequeue, ShutdownReason::kFailed);
  CHECK(rdzv.rounds_asked == 1);
  REQUIRE(EventsNamed("restart_refused").size() == 1);
  CHECK(EventsNamed("restart_refused")[0]["bad_launch"] == true);
  CHECK(EventsNamed("finished").at(0)["cause_class"] == "bad_launch");
  REQUIRE(rdzv.reports.size() == 1);
  CHECK(rdzv.reports[0].failures.at(0).bad_launch);
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: one rank failing early stops the group when the window ends, and restarts") {
  config.max_restarts = 3;
  launch_window = std::chrono::milliseconds(20);
  StartRunning();
  workers.Exit(0, 1);
  CHECK(workers.close_signals.empty());
  RunUntil([&] { return !workers.close_signals.empty(); });  // the window's timer
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);  // restarted: rank 1 was stopped, no bad launch
  CHECK(EventsNamed("restart_refused").empty());
  CHECK(EventsNamed("restart").size() == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: --restart-on-any-failure restarts a bad launch") {
  config.max_restarts = 1;
  config.restart_on_any_failure = true;
  launch_window = std::chrono::seconds(60);
  StartRunning();
  workers.Exit(0, 1);
  workers.Exit(1, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("restart").size() == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent verdict: a peer's failure in the launch window waits for its end; the bad launch is still told") {
  config.max_restarts = 3;
  launch_window = std::chrono::seconds(60);
  StartRunning();
  workers.Exit(0, 1);
  rdzv.FailRun(PeerVerdict());  // another node's bad launch closed the run first
  CHECK(workers.close_signals.empty());
  workers.Exit(1, 1);
  REQUIRE(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  REQUIRE(rdzv.reports.size() == 1);
  CHECK(rdzv.reports[0].failures.at(0).bad_launch);  // what `ctrun status --why` classes it by
  CHECK(EventsNamed("finished").at(0)["verdict"] == PeerVerdict().line);
  CHECK(rdzv.rounds_asked == 1);
}

}  // namespace
}  // namespace ctrun::launcher
