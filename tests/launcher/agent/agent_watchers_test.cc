// The agent and its watchers, scripted (agent_fixture.h): a worker's
// heartbeat miss (its stacks saved, the stop charged as heartbeat_expired),
// the step reports a keep-alive carries and the straggler flags the
// rendezvous sends back, and health checks that fail, time out or flood
// their output (the node leaves unhealthy: exit 4 and the report).
#include "tests/launcher/agent/agent_fixture.h"

#include <signal.h>

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

using namespace agent_testing;
using std::chrono::seconds;

std::string WatcherEnvValue(const WorkerSpec& spec, const std::string& key) {
  for (const std::string& kv : spec.env) {
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "";
}

// ---- Heartbeat (--heartbeat-timeout) ----------------------------------------

TEST_CASE_METHOD(AgentFixture, "agent: each group's heartbeat files are watched with its timeouts") {
  config.heartbeat_timeout = Seconds(30);
  config.heartbeat_initial_timeout = Seconds(300);
  liveness = &fake_liveness;
  StartRunning();
  CHECK(fake_liveness.heartbeat_watches == 1);
  CHECK(fake_liveness.timeouts.initial == seconds(300));
  CHECK(fake_liveness.timeouts.steady == seconds(30));
  REQUIRE(fake_liveness.heartbeat_files.size() == 2);
  CHECK(fake_liveness.step_files == fake_liveness.heartbeat_files);
  for (int lr = 0; lr < 2; ++lr) {
    CHECK(fake_liveness.heartbeat_files[lr] == WatcherEnvValue(workers.last_specs[lr], "CTRUN_HEARTBEAT_FILE"));
  }
  workers.Exit(0, 0);  // an exited worker is no longer watched
  CHECK(fake_liveness.forgotten == std::vector<int>{0});
}

TEST_CASE_METHOD(AgentFixture, "agent: without --heartbeat-timeout nothing is watched") {
  liveness = &fake_liveness;
  StartRunning();
  CHECK(fake_liveness.heartbeat_watches == 0);
  CHECK_FALSE(fake_liveness.steps_watched());
  CHECK_FALSE(rdzv.AskStepReport().has_value());
}

TEST_CASE_METHOD(AgentFixture, "agent: a heartbeat miss saves the worker's stacks and restarts the group, charged") {
  config.heartbeat_timeout = Seconds(30);
  config.max_restarts = 2;
  liveness = &fake_liveness;
  StartRunning();
  fake_liveness.Miss(1, seconds(31), /*ever_touched=*/true);
  CHECK(workers.stacks_saved == std::vector<std::pair<int, std::string>>{{1, "its heartbeat expired"}});
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  CHECK_FALSE(fake_liveness.heartbeat_watched());  // the stop ends the watches
  CHECK_FALSE(fake_liveness.steps_watched());
  const std::vector<Json> expired = EventsNamed("heartbeat_expired");
  REQUIRE(expired.size() == 1);
  CHECK(expired[0]["local_rank"] == 1);
  CHECK(expired[0]["pid"] == 1001);
  CHECK(expired[0]["silent_for_s"] == 31.0);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["cause"] == "heartbeat_expired");
  CHECK(restarts[0]["charged"] == true);
  CHECK(restarts[0]["restart_count"] == 1);
  CHECK(restarts[0]["remaining_restarts"] == 1);
  rdzv.CompleteRound(2);
  Poll();
  CHECK(fake_liveness.heartbeat_watches == 2);  // the new group is watched again
  CHECK(fake_liveness.heartbeat_watched());
}

TEST_CASE_METHOD(AgentFixture, "agent: a heartbeat miss with the budget spent fails the run") {
  config.heartbeat_timeout = Seconds(30);
  liveness = &fake_liveness;
  StartRunning();
  fake_liveness.Miss(0, seconds(30), /*ever_touched=*/false);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(EventsNamed("restart").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: fail-fast names a first heartbeat missed at start-up") {
  config.heartbeat_timeout = Seconds(30);
  config.fail_fast_on_startup = true;
  config.max_restarts = 3;
  liveness = &fake_liveness;
  StartRunning();
  fake_liveness.Miss(0, seconds(30), /*ever_touched=*/false);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitDoNotRequeue, ShutdownReason::kFailed);
  const std::vector<Json> failed = EventsNamed("startup_failed");
  REQUIRE(failed.size() == 1);
  CHECK(failed[0]["cause"] == "heartbeat_expired");
  CHECK(failed[0]["heartbeat_touched"] == false);
}

TEST_CASE_METHOD(AgentFixture, "agent: with a touch seen by the watch, fail-fast restarts a heartbeat miss") {
  config.heartbeat_timeout = Seconds(30);
  config.fail_fast_on_startup = true;
  config.max_restarts = 3;
  liveness = &fake_liveness;
  StartRunning();
  fake_liveness.touched = true;
  fake_liveness.Miss(0, seconds(30), /*ever_touched=*/true);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("startup_failed").empty());
}

// ---- Stragglers ------------------------------------------------------------

rdzv::StragglerChange Change(int rank, int local_rank, bool slow) {
  rdzv::StragglerChange c;
  c.rank = rank;
  c.local_rank = local_rank;
  c.slow = slow;
  c.step = slow ? seconds(3) : seconds(1);
  c.job_median = seconds(1);
  c.params = rdzv::StragglerParams{1.5, 5};
  return c;
}

TEST_CASE_METHOD(AgentFixture, "agent: each keep-alive carries the steps its workers finished since the last") {
  config.heartbeat_timeout = Seconds(30);
  config.straggler_factor = 2.0;
  config.straggler_intervals = 3;
  liveness = &fake_liveness;
  StartRunning();
  std::optional<rdzv::StepReport> report = rdzv.AskStepReport();
  REQUIRE(report.has_value());
  CHECK(report->round == 1);
  CHECK(report->params == rdzv::StragglerParams{2.0, 3});
  CHECK(report->ranks.empty());
  fake_liveness.samples = {StepSample{1, seconds(2), 10}, StepSample{7, seconds(1), 1}};  // 7: no such rank
  report = rdzv.AskStepReport();
  REQUIRE(report.has_value());
  CHECK(report->ranks == std::vector<rdzv::RankStep>{rdzv::RankStep{1, 1, seconds(2), 10}});
  workers.Exit(0, 1);  // the stop ends the reports
  CHECK_FALSE(rdzv.AskStepReport().has_value());
}

TEST_CASE_METHOD(AgentFixture, "agent: a straggler flagged, then recovered, makes its two events") {
  config.heartbeat_timeout = Seconds(30);
  liveness = &fake_liveness;
  StartRunning();
  rdzv.SendStraggler(Change(1, 1, /*slow=*/true));
  rdzv.SendStraggler(Change(1, 1, /*slow=*/false));
  const std::vector<Json> flagged = EventsNamed("straggler");
  REQUIRE(flagged.size() == 1);
  CHECK(flagged[0]["rank"] == 1);
  CHECK(flagged[0]["local_rank"] == 1);
  CHECK(flagged[0]["step_s"] == 3.0);
  CHECK(flagged[0]["job_median_s"] == 1.0);
  CHECK(flagged[0]["factor"] == 1.5);
  CHECK(flagged[0]["intervals"] == 5);
  CHECK(flagged[0]["restart_count"] == 0);
  const std::vector<Json> recovered = EventsNamed("straggler_recovered");
  REQUIRE(recovered.size() == 1);
  CHECK(recovered[0]["step_s"] == 1.0);
  CHECK(agent().state() == Agent::State::kRunning);  // a straggler is reported, not stopped
}

// ---- Health checks that fail, time out, flood ------------------------------

HealthResult Unhealthy(std::string failure, std::vector<std::string> lines) {
  HealthResult r;
  r.healthy = false;
  r.failure = std::move(failure);
  r.last_lines = std::move(lines);
  return r;
}

TEST_CASE_METHOD(AgentFixture, "agent: a health check killed by a signal before the join leaves with exit 4") {
  FakeHealth check;
  health = &check;
  Start();
  check.AnswerWith(Unhealthy("was killed by signal 9", {"nvidia-smi: hung"}));
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "health check 'check.sh' was killed by signal 9\n  nvidia-smi: hung");
  CHECK(workers.starts == 0);
}

TEST_CASE_METHOD(AgentFixture, "agent: a periodic health check that times out stops the workers and leaves with exit 4") {
  FakeHealth check;
  StartRunningWithPeriodicCheck(check);
  check.AnswerWith(Unhealthy("timed out after 30 s (--health-check-timeout)", {}));
  Poll();
  CHECK(agent().state() == Agent::State::kStopping);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "health check 'check.sh' timed out after 30 s (--health-check-timeout)");
  const std::vector<Json> ev = EventsNamed("node_unhealthy");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]["during"] == "running");
  CHECK(ev[0]["last_lines"] == Json::array());
}

TEST_CASE_METHOD(AgentFixture, "agent: a flooding health check's cut tail is the report, as it came") {
  FakeHealth check;
  health = &check;
  Start();
  // The check's output tail (launcher/health/output_tail.h): its last 20
  // lines only, a long one cut with "...".
  std::vector<std::string> lines;
  for (int i = 981; i < 1000; ++i) lines.push_back("flood line " + std::to_string(i));
  lines.push_back(std::string(400, 'x') + "...");
  check.AnswerWith(Unhealthy("exited with 2", lines));
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  std::string expected = "health check 'check.sh' exited with 2";
  for (const std::string& l : lines) expected += "\n  " + l;
  CHECK(rdzv.unhealthy_report == expected);
  const std::vector<Json> ev = EventsNamed("node_unhealthy");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]["report"] == expected);
  CHECK(ev[0]["last_lines"].get<std::vector<std::string>>() == lines);
}

}  // namespace
}  // namespace ctrun::launcher
