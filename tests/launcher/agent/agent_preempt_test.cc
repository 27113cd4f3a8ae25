// The agent's preemption (--preempt-grace; launcher/agent/agent_machine.h's
// "Preemption"): a notice from a signal or a peer, the workers' markers, the
// deadline, and the verdict's exit code and events.
#include "tests/launcher/agent/agent_fixture.h"

namespace ctrun::launcher {
namespace {

using agent_testing::AgentFixture;
using agent_testing::Json;

// The value of `name` in the worker's environment ("" when unset).
std::string EnvOf(const WorkerSpec& spec, const std::string& name) {
  for (const std::string& kv : spec.env) {
    if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteMarker(const WorkerSpec& spec, const std::string& text) {
  std::ofstream(EnvOf(spec, "CTRUN_PREEMPT_SAVED_FILE")) << text;
}

class PreemptFixture : public AgentFixture {
 public:
  PreemptFixture() {
    config.preempt_grace = Seconds(60);
    config.preempt_signal = SIGUSR1;
  }
  // The notice file the workers watch, read now ("" while absent).
  std::string Notice() const { return ReadFile(EnvOf(workers.last_specs.at(0), "CTRUN_PREEMPT_FILE")); }
};

TEST_CASE_METHOD(PreemptFixture, "preempt: each worker is told where the notice comes and where to confirm") {
  StartRunning();
  const std::string notice = EnvOf(workers.last_specs[0], "CTRUN_PREEMPT_FILE");
  CHECK(!notice.empty());
  CHECK(EnvOf(workers.last_specs[1], "CTRUN_PREEMPT_FILE") == notice);
  const std::string m0 = EnvOf(workers.last_specs[0], "CTRUN_PREEMPT_SAVED_FILE");
  const std::string m1 = EnvOf(workers.last_specs[1], "CTRUN_PREEMPT_SAVED_FILE");
  CHECK(!m0.empty());
  CHECK(m0 != m1);
  CHECK(!std::filesystem::exists(notice));
}

TEST_CASE_METHOD(PreemptFixture, "preempt: a notice signal, every worker confirms one step: saved, exit 75") {
  StartRunning();
  agent().HandleSignal(SIGUSR1);
  Poll();
  CHECK(agent().state() == Agent::State::kRunning);  // the workers save: nothing is stopped yet
  CHECK(workers.close_signals.empty());
  const Json notice = Json::parse(Notice());
  CHECK(notice["source"] == "SIGUSR1");
  CHECK(notice["budget_s"] == 60.0);
  REQUIRE(rdzv.sent_notices.size() == 1);
  CHECK(rdzv.sent_notices[0].source == "SIGUSR1");
  CHECK(rdzv.sent_notices[0].remaining_s == 60.0);
  agent().HandleSignal(SIGUSR1);  // again: changes nothing
  CHECK(rdzv.sent_notices.size() == 1);
  WriteMarker(workers.last_specs[0], "41\n");
  WriteMarker(workers.last_specs[1], "41\n");
  workers.Exit(0, 0);
  workers.Exit(1, 0);
  CHECK(agent().state() == Agent::State::kStopping);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitPreemptedSaved, ShutdownReason::kSignal);
  REQUIRE(EventsNamed("preempt_notice").size() == 1);
  CHECK(EventsNamed("preempt_notice")[0]["source"] == "SIGUSR1");
  const std::vector<Json> saved = EventsNamed("preempt_saved");
  REQUIRE(saved.size() == 1);
  CHECK(saved[0]["step"] == 41);
  CHECK(EventsNamed("preempt_missed").empty());
}

TEST_CASE_METHOD(PreemptFixture, "preempt: markers of different steps, or none, are a missed save: exit 76") {
  StartRunning();
  agent().HandleSignal(SIGTERM);
  Poll();
  std::string why;
  SECTION("different steps") {
    WriteMarker(workers.last_specs[0], "41\n");
    WriteMarker(workers.last_specs[1], "42\n");
    why = "the workers saved different steps: step 41 (local rank 0), step 42 (local rank 1)";
  }
  SECTION("a worker exits 0 without a marker") {
    WriteMarker(workers.last_specs[0], "41\n");
    why = "local rank 1 exited 0 without writing CTRUN_PREEMPT_SAVED_FILE";
  }
  workers.Exit(0, 0);
  workers.Exit(1, 0);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitPreemptMissed, ShutdownReason::kSignal);
  REQUIRE(EventsNamed("preempt_missed").size() == 1);
  CHECK(EventsNamed("preempt_missed")[0]["why"] == why);
}

TEST_CASE_METHOD(PreemptFixture, "preempt: workers that finish the job during the notice, saving nothing: exit 0") {
  StartRunning();
  agent().HandleSignal(SIGUSR1);
  Poll();
  workers.Exit(0, 0);
  workers.Exit(1, 0);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
  CHECK(EventsNamed("preempt_saved").empty());
  CHECK(EventsNamed("preempt_missed").empty());
}

TEST_CASE_METHOD(PreemptFixture, "preempt: the deadline passes: the workers are stopped, exit 76") {
  config.preempt_grace = Seconds(0.001);
  StartRunning();
  agent().HandleSignal(SIGUSR1);
  RunUntil([&] { return workers.closing(); });
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitPreemptMissed, ShutdownReason::kSignal);
  REQUIRE(EventsNamed("preempt_missed").size() == 1);
  CHECK(EventsNamed("preempt_missed")[0]["why"].get<std::string>().find("deadline") != std::string::npos);
}

TEST_CASE_METHOD(PreemptFixture, "preempt: a worker failing during the notice is no restart: exit 76") {
  config.max_restarts = 3;
  StartRunning();
  agent().HandleSignal(SIGUSR1);
  Poll();
  workers.Exit(1, 1);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitPreemptMissed, ShutdownReason::kSignal);
  CHECK(workers.starts == 1);
  CHECK(EventsNamed("restart").empty());
  CHECK(EventsNamed("preempt_missed")[0]["why"] ==
        "worker local_rank 1 exited with 1 before the save was confirmed");
}

TEST_CASE_METHOD(PreemptFixture, "preempt: a peer's notice tells the workers, is not sent back, and bounds the budget") {
  StartRunning();
  rdzv.PushPreempt(PreemptNotice{12.5, "SIGUSR1", "node-b"});
  Poll();
  const Json notice = Json::parse(Notice());
  CHECK(notice["source"] == "node node-b (SIGUSR1)");
  CHECK(notice["budget_s"] == 12.5);
  CHECK(rdzv.sent_notices.empty());
  // Saved peers leave the run: no restart.
  rdzv.ChangeMembership(/*charged=*/true, "node node-b left");
  CHECK(agent().state() == Agent::State::kRunning);
  CHECK(workers.close_signals.empty());
  WriteMarker(workers.last_specs[0], "7");
  WriteMarker(workers.last_specs[1], " 7 \n");
  workers.Exit(0, 0);
  workers.Exit(1, 0);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitPreemptedSaved, ShutdownReason::kSignal);
}

TEST_CASE_METHOD(PreemptFixture, "preempt: a notice while the group stops for a restart ends the job: exit 76") {
  config.max_restarts = 3;
  StartRunning();
  workers.Exit(0, 1);
  REQUIRE(agent().state() == Agent::State::kStopping);
  agent().HandleSignal(SIGTERM);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitPreemptMissed, ShutdownReason::kSignal);
  CHECK(workers.starts == 1);
  CHECK(EventsNamed("preempt_missed")[0]["why"] == "the workers were being stopped for a restart (worker_failed)");
}

TEST_CASE_METHOD(PreemptFixture, "preempt: a notice with no group running is missed at once") {
  Start();
  REQUIRE(agent().state() == Agent::State::kRendezvous);
  agent().HandleSignal(SIGTERM);
  Poll();
  CheckFinished(Agent::State::kFailed, kExitPreemptMissed, ShutdownReason::kSignal);
  CHECK(EventsNamed("preempt_missed")[0]["why"] == "no workers were running when it came");
}

TEST_CASE_METHOD(PreemptFixture, "preempt: a budget of 0 (Slurm's limit inside the margin) still tells the peers") {
  config.slurm_job_end_unix_s = 1.0;  // long past
  StartRunning();
  agent().HandleSignal(SIGUSR1);
  REQUIRE(rdzv.sent_notices.size() == 1);
  CHECK(rdzv.sent_notices[0].remaining_s > 0);
  CHECK(Json::parse(Notice())["budget_s"] == 0.0);
  RunUntil([&] { return workers.closing(); });  // the deadline is now
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitPreemptMissed, ShutdownReason::kSignal);
}

TEST_CASE_METHOD(PreemptFixture, "preempt: a second SIGTERM stops the workers now and exits for it") {
  StartRunning();
  agent().HandleSignal(SIGTERM);
  Poll();
  CHECK(workers.close_signals.empty());
  agent().HandleSignal(SIGTERM);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(EventsNamed("preempt_missed")[0]["why"] == "a second signal (SIGTERM) stopped the workers");
}

TEST_CASE_METHOD(AgentFixture, "preempt: without --preempt-grace SIGTERM stops at once and a peer's notice is ignored") {
  StartRunning();
  CHECK(EnvOf(workers.last_specs[0], "CTRUN_PREEMPT_FILE").empty());
  rdzv.PushPreempt(PreemptNotice{10, "SIGUSR1", "node-b"});
  Poll();
  CHECK(workers.close_signals.empty());
  agent().HandleSignal(SIGTERM);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(EventsNamed("preempt_notice").empty());
}

}  // namespace
}  // namespace ctrun::launcher
