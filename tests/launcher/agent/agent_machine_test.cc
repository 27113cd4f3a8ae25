// AgentMachine (launcher/agent/agent_machine.h) as event scripts: the
// actions of the main paths, one by one. No I/O, no clock: the script's
// time moves only when it says so. The diagram's walk is
// agent_machine_walk_test.cc.
#include "tests/launcher/agent/agent_script.h"

namespace ctrun::launcher {
namespace {

using namespace std::chrono_literals;
using namespace agent_script;

// ---------------------------------------------------------------------------
// The actions of the main paths.

TEST_CASE("a failed worker closes the group with SIGTERM and the shutdown grace, then restarts charged") {
  Script s;
  s.ToRunning().FailWorker();
  const AgentAction* record = s.Find(Kind::kRecordFailure);
  REQUIRE(record);
  CHECK(record->local_rank == 0);
  CHECK_FALSE(record->flag);  // not stopped by the agent: a cause
  CHECK(record->seconds == Approx(5.0));
  const AgentAction* close = s.Find(Kind::kCloseGroup);
  REQUIRE(close);
  CHECK(close->signal == SIGTERM);
  CHECK(close->grace == Duration(5s));
  CHECK(close->flag);  // the attempt's first close
  CHECK(s.Find(Kind::kCancelTimer)->timer == AgentTimer::kHealth);
  // The other worker, SIGTERMed by the close: stopped by the agent.
  s.Feed(E::WorkerExited(1, 1, 101, -SIGTERM));
  REQUIRE(s.Find(Kind::kRecordFailure));
  CHECK(s.Find(Kind::kRecordFailure)->flag);
  CHECK(s.Emitted("worker_exited")->fields["during"] == "stopping");
  s.End();
  const AgentAction* restart = s.Emitted("restart");
  REQUIRE(restart);
  CHECK(restart->fields["cause"] == "worker_failed");
  CHECK(restart->fields["charged"] == true);
  CHECK(restart->fields["restart_count"] == 1);
  CHECK(restart->fields["remaining_restarts"] == 1);
  REQUIRE(s.Find(Kind::kPrepareAttempt));
  CHECK(s.Find(Kind::kPrepareAttempt)->restart_count == 1);
  CHECK(s.m.remaining_restarts() == 1);
}

TEST_CASE("a scale-up's restart is not charged; a loss pushed during a charged restart makes it uncharged") {
  Script s;
  s.ToRunning().FailWorker().Feed(E::MembershipChanged(false, "node b was lost"));
  CHECK(s.m.stop().cause == StopCause::kMembershipChanged);
  CHECK_FALSE(s.m.stop().charged);
  s.End();
  CHECK(s.Emitted("restart")->fields["charged"] == false);
  CHECK(s.m.restart_count() == 0);
  CHECK(s.m.remaining_restarts() == 2);
}

TEST_CASE("--restart-backoff doubles the delay after each crash of a run under --min-healthy-uptime") {
  AgentMachineConfig c = TestConfig();
  c.max_restarts = 5;
  c.policy.backoff = 2s;
  c.policy.min_healthy_uptime = 60s;
  c.backoff_on = true;
  Script s(c);
  s.ToRunning().FailWorker().End();
  REQUIRE(s.Find(Kind::kArmTimer));
  CHECK(s.Find(Kind::kArmTimer)->grace == Duration(2s));
  CHECK(s.Emitted("restart")->fields["delay_s"] == 2.0);
  s.Feed(E::Timer(AgentTimer::kBackoff)).Feed(E::AttemptPrepared(true)).Feed(E::RoundReady(Round{}));
  s.Feed(E::WorkersStarted(2)).Advance(5s).FailWorker().End();
  CHECK(s.Find(Kind::kArmTimer)->grace == Duration(4s));
}

TEST_CASE("a failure in the first second waits out the window; the other workers run on") {
  Script s;
  s.ToRunning(false).Advance(300ms).FailWorker();
  CHECK(s.m.phase() == AgentPhase::kLaunchWindow);
  CHECK_FALSE(s.Find(Kind::kCloseGroup));
  REQUIRE(s.Find(Kind::kArmTimer));
  CHECK(s.Find(Kind::kArmTimer)->timer == AgentTimer::kLaunchWindow);
  CHECK(s.Find(Kind::kArmTimer)->grace == Duration(700ms));
  CHECK(s.Logged("at the end of its first second"));
  // A second failure arms nothing new.
  AgentMachine copy = s.m;
  CHECK(copy.Step(E::WorkerExited(1, 1, 101, 1), s.now).size() > 0);
  s.Feed(E::Timer(AgentTimer::kLaunchWindow));
  CHECK(s.Find(Kind::kCloseGroup)->signal == SIGTERM);
}

TEST_CASE("a peer's failure stops running workers within a second; its verdict is the end's") {
  Script s;
  rdzv::VerdictSummary v;
  v.line = "verdict: rank 3 on b crashed with a segmentation fault (SIGSEGV)";
  s.ToRunning().Feed(E::PeerFailed(v));
  REQUIRE(s.Find(Kind::kCloseGroup));
  CHECK(s.Find(Kind::kCloseGroup)->grace == Duration(AgentMachine::kPeerFailedGrace));
  CHECK(s.Emitted("peer_failed")->fields["verdict"] == v.line);
  s.End(false);
  // The peer's verdict: no resolving; the line, the Leave's verdict, exit 1.
  CHECK_FALSE(s.Find(Kind::kResolveVerdict));
  CHECK(s.Logged(v.line));
  REQUIRE(s.Find(Kind::kSetFailureVerdict));
  CHECK(s.Emitted("finished")->fields["verdict"] == v.line);
  CHECK(s.m.phase() == AgentPhase::kFailed);
  CHECK(s.m.exit_code() == kExitFailure);
}

TEST_CASE("with --kill-on-bad-exit 0 a peer's failure changes nothing") {
  AgentMachineConfig c = TestConfig();
  c.kill_on_bad_exit = false;
  Script s(c);
  s.ToRunning().Feed(E::PeerFailed(std::nullopt));
  CHECK(s.m.phase() == AgentPhase::kRunning);
  CHECK(s.Logged("--kill-on-bad-exit 0"));
  CHECK_FALSE(s.Find(Kind::kCloseGroup));
}

TEST_CASE("a signal during a stop waits for it; a second one kills now") {
  Script s;
  s.ToRunning().FailWorker().Feed(E::Signal(kHangup));
  CHECK(s.m.phase() == AgentPhase::kStoppingForSignal);
  CHECK_FALSE(s.Find(Kind::kCloseGroup));  // the workers keep their grace
  s.Feed(E::Signal(kHangup));
  REQUIRE(s.Find(Kind::kCloseGroup));
  CHECK(s.Find(Kind::kCloseGroup)->signal == kHangup);
  CHECK_FALSE(s.Find(Kind::kCloseGroup)->flag);  // the same group, escalated
  CHECK(s.Logged("second signal"));
  // Failures after a signal are not recorded.
  s.Feed(E::WorkerExited(1, 1, 101, -kHangup));
  CHECK_FALSE(s.Find(Kind::kRecordFailure));
  s.End();
  CHECK(s.m.exit_code() == kExitSignalBase + kHangup);
  CHECK(s.Find(Kind::kFinish)->reason == ShutdownReason::kSignal);
}

TEST_CASE("leaving as unhealthy keeps exit 4 whatever signal comes") {
  Script s;
  s.ToRunning().Feed(E::ExclusionRequest("ECC errors"));
  CHECK(s.Emitted("node_unhealthy")->fields["source"] == "exclusion_request");
  s.Feed(E::Signal(kHangup));
  CHECK(s.Logged("still exits 4"));
  CHECK_FALSE(s.Find(Kind::kCloseGroup));
  s.Feed(E::Signal(kHangup));
  CHECK(s.Find(Kind::kCloseGroup)->signal == kHangup);
  s.End();
  REQUIRE(s.Find(Kind::kPrintUnhealthy));
  CHECK(s.Find(Kind::kSetUnhealthyReport)->text.find("ECC errors") != std::string::npos);
  CHECK(s.m.exit_code() == kExitNodeUnhealthy);
  CHECK(s.Find(Kind::kFinish)->reason == ShutdownReason::kUnhealthy);
}

TEST_CASE("a notice writes its file, tells the peers, and waits for the save with a line every 5 s") {
  Script s;
  s.ToRunning().Feed(E::Signal(kNotice));
  REQUIRE(s.Find(Kind::kWriteNotice));
  CHECK(s.Find(Kind::kWriteNotice)->notice.budget_s == 30);
  CHECK(s.Find(Kind::kWriteNotice)->notice.deadline_unix_s == Approx(s.now.unix_s + 30));
  CHECK(s.Find(Kind::kSendPreemptNotice)->peer_notice.source == "SIGUSR1");
  std::set<AgentTimer> armed;
  for (const AgentAction& a : s.last) {
    if (a.kind == Kind::kArmTimer) armed.insert(a.timer);
  }
  CHECK(armed == std::set<AgentTimer>{AgentTimer::kPreemptDeadline, AgentTimer::kPreemptWaiting});
  s.Advance(5s).Feed(E::Timer(AgentTimer::kPreemptWaiting));
  REQUIRE(s.Find(Kind::kLogPreemptWaiting));
  CHECK(s.Find(Kind::kLogPreemptWaiting)->seconds == Approx(25));
  CHECK(s.Find(Kind::kLogPreemptWaiting)->running == 2);
  s.Feed(E::MembershipChanged(true, "node b left"));
  CHECK_FALSE(s.Find(Kind::kCloseGroup));  // no restart during a notice
  s.ExitAll().End(false);
  REQUIRE(s.Find(Kind::kReadPreemptVerdict));
  s.Feed(E::PreemptVerdictRead(Saved(42)));
  CHECK(s.Emitted("preempt_saved")->fields["step"] == 42);
  CHECK(s.m.exit_code() == kExitPreemptedSaved);
}

TEST_CASE("a peer's notice takes the smaller budget; without --preempt-grace it is only a warning") {
  Script s;
  s.ToRunning().Feed(E::PeerPreempt(PreemptNotice{12.5, "SIGTERM", "10.0.0.2:29400"}));
  CHECK(s.Find(Kind::kWriteNotice)->notice.budget_s == 12.5);
  CHECK(s.Find(Kind::kWriteNotice)->notice.source == "node 10.0.0.2:29400 (SIGTERM)");
  CHECK_FALSE(s.Find(Kind::kSendPreemptNotice));
  AgentMachineConfig c = TestConfig();
  c.preempt_grace_s.reset();
  Script plain(c);
  plain.ToRunning().Feed(E::PeerPreempt(PreemptNotice{12.5, "SIGTERM", "10.0.0.2:29400"}));
  CHECK(plain.Logged("without --preempt-grace"));
  CHECK(plain.m.phase() == AgentPhase::kRunning);
}

TEST_CASE("a notice missed by a failed worker ends with 76 and the failure report") {
  Script s;
  s.ToSaving().FailWorker().End();
  CHECK(s.Find(Kind::kPrintFailureReport));
  CHECK(s.Emitted("preempt_missed")->fields["why"].get<std::string>().find("local_rank 0") != std::string::npos);
  CHECK(s.m.exit_code() == kExitPreemptMissed);
}

TEST_CASE("processes that outlive SIGKILL end the job as stuck, whatever the stop was for") {
  Script s;
  s.ToRunning().ExitAll().Feed(E::GroupClosed("pid 7 outlived SIGKILL")).Feed(E::AttemptEnded(false));
  CHECK(s.Find(Kind::kReportStuck));
  CHECK(s.Find(Kind::kSetUnhealthyReport)->text == "pid 7 outlived SIGKILL");
  CHECK(s.m.exit_code() == kExitWorkersStuck);
}

TEST_CASE("no restarts left: the report's code and the run's verdict end the job") {
  AgentMachineConfig c = TestConfig();
  c.max_restarts = 0;
  Script s(c);
  s.ToRunning().FailWorker().End(true, 7);
  REQUIRE(s.Find(Kind::kPrintFailureReport));
  CHECK_FALSE(s.Find(Kind::kPrintFailureReport)->code);
  REQUIRE(s.Find(Kind::kResolveVerdict));
  CHECK(s.m.state() == AgentState::kFailed);  // signals change nothing now
  rdzv::VerdictSummary v;
  v.line = "verdict: rank 0 on a raised ValueError: bad shape";
  v.rank = 0;
  s.Feed(E::VerdictResolved(v));
  CHECK(s.Logged(v.line));
  CHECK(s.Find(Kind::kSetFailureVerdict)->verdict->line == v.line);
  CHECK(s.Emitted("finished")->fields["cause_rank"] == 0);
  CHECK(s.m.exit_code() == 7);
  CHECK(s.m.verdict()->line == v.line);
}

TEST_CASE("a failure no restart fixes, or one at start-up under fail-fast, ends with 3") {
  Script bad;
  bad.ToRunning().FailWorker().End(true, 1, BadLaunch());
  CHECK(bad.Emitted("restart_refused")->fields["bad_launch"] == true);
  CHECK(bad.Find(Kind::kPrintFailureReport)->code == kExitDoNotRequeue);
  AgentMachineConfig c = TestConfig();
  c.policy.restart_unfixable = true;
  Script forced(c);
  forced.ToRunning().FailWorker().End(true, 1, BadLaunch());
  CHECK(forced.Emitted("restart"));
  c = TestConfig();
  c.policy.fail_fast_on_startup = true;
  c.policy.min_healthy_uptime = 60s;
  c.min_healthy_uptime_s = 60;
  Script fast(c);
  fast.ToRunning().FailWorker().End();
  CHECK(fast.Emitted("startup_failed")->fields["uptime_s"] == 5.0);
  CHECK(fast.Logged("--min-healthy-uptime 60 s"));
  fast.Feed(E::VerdictResolved(std::nullopt));
  CHECK(fast.m.exit_code() == kExitDoNotRequeue);
}

TEST_CASE("a heartbeat miss saves the hung worker's stacks and marks its failure as the cause") {
  Script s;
  s.ToRunning().Feed(E::HeartbeatMissed(1, 101, 31.5, false));
  CHECK(s.Logged("never touched CTRUN_HEARTBEAT_FILE"));
  REQUIRE(s.Find(Kind::kSaveStacks));
  CHECK(s.Find(Kind::kSaveStacks)->local_rank == 1);
  CHECK(s.m.stop().cause == StopCause::kHeartbeatExpired);
  s.Feed(E::WorkerExited(1, 1, 101, -SIGTERM));
  CHECK(s.Find(Kind::kRecordFailure)->hung);
}

TEST_CASE("the health check runs before every join and every interval while running") {
  Script s(WithHealth());
  s.Feed(E::Start()).Feed(E::AttemptPrepared(true));
  REQUIRE(s.Find(Kind::kRunHealthCheck));
  CHECK_FALSE(s.Find(Kind::kRunHealthCheck)->flag);
  s.Feed(E::HealthChecked(false, true)).Feed(E::RoundReady(Round{})).Feed(E::WorkersStarted(1));
  CHECK(s.Find(Kind::kArmTimer)->timer == AgentTimer::kHealth);
  CHECK(s.Find(Kind::kArmTimer)->grace == Duration(10s));
  s.Feed(E::Timer(AgentTimer::kHealth));
  CHECK(s.Find(Kind::kRunHealthCheck)->flag);
  s.Feed(E::HealthChecked(true, true));
  CHECK(s.Find(Kind::kArmTimer)->timer == AgentTimer::kHealth);
}

TEST_CASE("the machine is a value: a copy given the same events gives the same actions") {
  Script s;
  s.ToRunning();
  AgentMachine copy = s.m;
  const std::vector<AgentEvent> script{E::WorkerExited(0, 0, 100, 1), E::WorkerExited(1, 1, 101, -SIGTERM),
                                       E::GroupClosed(), E::AttemptEnded(true)};
  for (const AgentEvent& e : script) {
    const std::vector<AgentAction> a = s.m.Step(e, s.now);
    const std::vector<AgentAction> b = copy.Step(e, s.now);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].kind == b[i].kind);
      CHECK(a[i].text == b[i].text);
      CHECK(a[i].fields == b[i].fields);
    }
  }
  CHECK(s.m.phase() == copy.phase());
}

TEST_CASE("events of another phase are ignored") {
  Script s;
  s.ToRunning();
  for (const AgentEvent& e : {E::RoundReady(Round{}), E::AttemptPrepared(true), E::Timer(AgentTimer::kBackoff),
                              E::Timer(AgentTimer::kLaunchWindow), E::GroupClosed(), E::AttemptEnded(true),
                              E::VerdictResolved(std::nullopt), E::HealthChecked(false, false)}) {
    CHECK(s.m.Step(e, s.now).empty());
    CHECK(s.m.phase() == AgentPhase::kRunning);
  }
}

}  // namespace
}  // namespace ctrun::launcher
