// AgentMachine (launcher/agent/agent_machine.h) as event scripts: every
// arrow its diagram draws is walked (the diagram is read from the header,
// so an arrow drawn without a walk, or a walk of no drawn arrow, fails), and
// the actions of the main paths are checked one by one. No I/O, no clock:
// the script's time moves only when it says so.
#include "launcher/agent/agent_machine.h"

#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "launcher/cli/exit_codes.h"
#include "tests/source_path.h"

namespace ctrun::launcher {
namespace {

using namespace std::chrono_literals;
using Kind = AgentAction::Kind;
using E = AgentEvent;

constexpr int kHangup = SIGHUP;     // a handled signal that is no preemption notice
constexpr int kNotice = SIGUSR1;    // --preempt-signal

AttemptEnd BadLaunch() {
  AttemptEnd end;
  end.bad_launch = true;
  return end;
}

PreemptVerdict Saved(long long step) {
  PreemptVerdict v;
  v.saved = true;
  v.step = step;
  return v;
}

PreemptVerdict Finished() {
  PreemptVerdict v;
  v.finished = true;
  return v;
}

AgentMachineConfig TestConfig() {
  AgentMachineConfig c;
  c.max_restarts = 2;
  c.shutdown_grace = 5s;
  c.kill_on_bad_exit = true;
  c.preempt_grace_s = 30;
  c.preempt_signal = kNotice;
  c.launch_window = 1s;
  return c;
}

// One machine and its clock; every step's actions are kept.
struct Script {
  explicit Script(AgentMachineConfig c = TestConfig()) : config(c), m(c) {}

  Script& Feed(const AgentEvent& e) {
    last = m.Step(e, now);
    all.insert(all.end(), last.begin(), last.end());
    return *this;
  }
  Script& Advance(Duration d) {
    now.steady += d;
    now.unix_s += std::chrono::duration<double>(d).count();
    return *this;
  }
  // The last step's first action of `kind` (null: none).
  const AgentAction* Find(Kind kind) const {
    for (const AgentAction& a : last) {
      if (a.kind == kind) return &a;
    }
    return nullptr;
  }
  const AgentAction* Emitted(const std::string& name) const {
    for (const AgentAction& a : last) {
      if (a.kind == Kind::kEmit && a.text == name) return &a;
    }
    return nullptr;
  }
  bool Logged(const std::string& part) const {
    for (const AgentAction& a : last) {
      if (a.kind == Kind::kLog && a.text.find(part) != std::string::npos) return true;
    }
    return false;
  }

  // Reaching phases. The round: Start, the attempt's directories, the
  // pre-join check when configured.
  Script& ToRendezvous() {
    Feed(E::Start());
    Feed(E::AttemptPrepared(true));
    if (config.health_check) Feed(E::HealthChecked(false, true));
    REQUIRE(Find(Kind::kNextRound));
    return *this;
  }
  // Two workers started; `settled`: past the launch window.
  Script& ToRunning(bool settled = true) {
    ToRendezvous();
    Feed(E::RoundReady(Round{}));
    REQUIRE(Find(Kind::kStartWorkers));
    Feed(E::WorkersStarted(2));
    if (settled) Advance(5s);
    return *this;
  }
  Script& ToLaunchWindow() {
    ToRunning(false).Advance(100ms).Feed(E::WorkerExited(0, 0, 100, 1));
    return *this;
  }
  Script& ToSaving() { return ToRunning().Feed(E::Signal(kNotice)); }
  Script& FailWorker() { return Feed(E::WorkerExited(0, 0, 100, 1)); }
  Script& ExitAll() { return Feed(E::WorkerExited(0, 0, 100, 0)).Feed(E::WorkerExited(1, 1, 101, 0)); }
  // The stop under way ends: the group closes, its output drains.
  Script& End(bool failures = true, int report_code = 1, AttemptEnd notes = {}) {
    Feed(E::GroupClosed());
    REQUIRE(Find(Kind::kEndWhenDrained));
    return Feed(E::AttemptEnded(failures, report_code, notes));
  }

  AgentMachineConfig config;
  AgentMachine m;
  AgentNow now{TimePoint{} + 1000s, 1.8e9};
  std::vector<AgentAction> last;
  std::vector<AgentAction> all;
};

// ---------------------------------------------------------------------------
// The diagram, walked.

const std::map<std::string, AgentPhase>& PhasesByName() {
  static const std::map<std::string, AgentPhase> phases{
      {"kInit", AgentPhase::kInit},
      {"kRendezvous", AgentPhase::kRendezvous},
      {"kRunning", AgentPhase::kRunning},
      {"kLaunchWindow", AgentPhase::kLaunchWindow},
      {"kSaving", AgentPhase::kSaving},
      {"kStoppingForRestart", AgentPhase::kStoppingForRestart},
      {"kStoppingToSucceed", AgentPhase::kStoppingToSucceed},
      {"kStoppingForSignal", AgentPhase::kStoppingForSignal},
      {"kLeavingUnhealthy", AgentPhase::kLeavingUnhealthy},
      {"kStoppingPreempted", AgentPhase::kStoppingPreempted},
      {"kStoppingForPeer", AgentPhase::kStoppingForPeer},
      {"kBackoff", AgentPhase::kBackoff},
      {"kConcluding", AgentPhase::kConcluding},
      {"kSucceeded", AgentPhase::kSucceeded},
      {"kFailed", AgentPhase::kFailed},
  };
  return phases;
}

struct Walk {
  std::string from, event, to;
  std::function<void(AgentMachineConfig&)> configure;  // null: TestConfig as is
  std::function<void(Script&)> reach;                  // to `from`
  std::function<void(Script&)> step;                   // the event
};

AgentMachineConfig WithHealth() {
  AgentMachineConfig c = TestConfig();
  c.health_check = true;
  c.health_interval = 10s;
  return c;
}

std::vector<Walk> Walks() {
  auto none = [](Script&) {};
  auto rdzv = [](Script& s) { s.ToRendezvous(); };
  auto running = [](Script& s) { s.ToRunning(); };
  auto window = [](Script& s) { s.ToLaunchWindow(); };
  auto saving = [](Script& s) { s.ToSaving(); };
  auto restarting = [](Script& s) { s.ToRunning().FailWorker(); };
  auto backoff = [](Script& s) { s.ToRunning().FailWorker().End(); };
  auto with_backoff = [](AgentMachineConfig& c) {
    c.policy.backoff = 2s;
    c.backoff_on = true;
  };
  auto with_health = [](AgentMachineConfig& c) { c = WithHealth(); };
  auto signal = [](Script& s) { s.Feed(E::Signal(kHangup)); };
  auto notice = [](Script& s) { s.Feed(E::Signal(kNotice)); };
  auto peer = [](Script& s) { s.Feed(E::PeerFailed(std::nullopt)); };
  auto fail = [](Script& s) { s.FailWorker(); };
  auto end = [](Script& s) { s.End(); };
  auto concluding = [](Script& s) { s.ToRendezvous().Feed(E::RoundReady(Round{})).Feed(E::StartFailed("no exec")); };
  return {
      {"kInit", "start", "kRendezvous", {}, none, [](Script& s) { s.Feed(E::Start()); }},
      {"kInit", "signal", "kFailed", {}, none, signal},
      {"kInit", "notice", "kFailed", {}, none, notice},
      {"kRendezvous", "workers started", "kRunning", {}, rdzv,
       [](Script& s) { s.Feed(E::RoundReady(Round{})).Feed(E::WorkersStarted(2)); }},
      {"kRendezvous", "attempt dir failed", "kFailed", {}, [](Script& s) { s.Feed(E::Start()); },
       [](Script& s) { s.Feed(E::AttemptPrepared(false, "cannot make the attempt's directory")); }},
      {"kRendezvous", "round failed", "kFailed", {}, rdzv, [](Script& s) { s.Feed(E::RoundFailed("timed out", false)); }},
      {"kRendezvous", "unhealthy budget spent", "kFailed", {}, rdzv,
       [](Script& s) { s.Feed(E::RoundFailed("3 nodes were unhealthy", true)); }},
      {"kRendezvous", "round failed, a peer failed", "kConcluding", {}, rdzv,
       [](Script& s) { s.Feed(E::PeerFailed(std::nullopt)).Feed(E::RoundFailed("the run is closed", false)); }},
      {"kRendezvous", "workers failed to start", "kConcluding", {}, rdzv,
       [](Script& s) { s.Feed(E::RoundReady(Round{})).Feed(E::StartFailed("no such file")); }},
      {"kRendezvous", "pre-join check failed", "kFailed", with_health,
       [](Script& s) { s.Feed(E::Start()).Feed(E::AttemptPrepared(true)); },
       [](Script& s) { s.Feed(E::HealthChecked(false, false, "check.sh", "exited with 1", "report")); }},
      {"kRendezvous", "signal", "kFailed", {}, rdzv, signal},
      {"kRendezvous", "notice", "kFailed", {}, rdzv, notice},
      {"kRunning", "worker failed", "kStoppingForRestart", {}, running, fail},
      {"kRunning", "worker failed in the first second", "kLaunchWindow", {}, [](Script& s) { s.ToRunning(false); },
       fail},
      {"kRunning", "heartbeat missed", "kStoppingForRestart", {}, running,
       [](Script& s) { s.Feed(E::HeartbeatMissed(1, 101, 30, true)); }},
      {"kRunning", "membership changed", "kStoppingForRestart", {}, running,
       [](Script& s) { s.Feed(E::MembershipChanged(true, "node b was lost")); }},
      {"kRunning", "last worker exited 0", "kStoppingToSucceed", {}, running, [](Script& s) { s.ExitAll(); }},
      {"kRunning", "signal", "kStoppingForSignal", {}, running, signal},
      {"kRunning", "periodic check failed", "kLeavingUnhealthy", with_health, running,
       [](Script& s) { s.Feed(E::HealthChecked(true, false, "check.sh", "exited with 1", "report")); }},
      {"kRunning", "exclusion request", "kLeavingUnhealthy", {}, running,
       [](Script& s) { s.Feed(E::ExclusionRequest("ECC errors")); }},
      {"kRunning", "notice", "kSaving", {}, running, notice},
      {"kRunning", "run failed", "kStoppingForPeer", {}, running, peer},
      {"kLaunchWindow", "window's end", "kStoppingForRestart", {}, window,
       [](Script& s) { s.Feed(E::Timer(AgentTimer::kLaunchWindow)); }},
      {"kLaunchWindow", "last worker exited", "kStoppingForRestart", {}, window,
       [](Script& s) { s.Feed(E::WorkerExited(1, 1, 101, 1)); }},
      {"kLaunchWindow", "window's end, a peer failed", "kStoppingForPeer", {}, window,
       [](Script& s) { s.Feed(E::PeerFailed(std::nullopt)).Feed(E::Timer(AgentTimer::kLaunchWindow)); }},
      {"kLaunchWindow", "run failed", "kLaunchWindow", {}, window, peer},
      {"kLaunchWindow", "signal", "kStoppingForSignal", {}, window, signal},
      {"kLaunchWindow", "notice", "kSaving", {}, window, notice},
      {"kSaving", "every worker exited 0", "kStoppingPreempted", {}, saving, [](Script& s) { s.ExitAll(); }},
      {"kSaving", "worker failed", "kStoppingPreempted", {}, saving, fail},
      {"kSaving", "deadline", "kStoppingPreempted", {}, saving,
       [](Script& s) { s.Feed(E::Timer(AgentTimer::kPreemptDeadline)); }},
      {"kSaving", "second signal", "kStoppingForSignal", {}, saving, [](Script& s) { s.Feed(E::Signal(SIGTERM)); }},
      {"kSaving", "membership changed", "kSaving", {}, saving,
       [](Script& s) { s.Feed(E::MembershipChanged(true, "node b left")); }},
      {"kSaving", "run failed", "kSaving", {}, saving, peer},
      {"kSaving", "heartbeat missed", "kStoppingForRestart", {}, saving,
       [](Script& s) { s.Feed(E::HeartbeatMissed(0, 100, 30, true)); }},
      {"kStoppingForRestart", "membership changed, not charged", "kStoppingForRestart", {}, restarting,
       [](Script& s) { s.Feed(E::MembershipChanged(false, "node c joins")); }},
      {"kStoppingForRestart", "exclusion request", "kLeavingUnhealthy", {}, restarting,
       [](Script& s) { s.Feed(E::ExclusionRequest("ECC errors")); }},
      {"kStoppingForRestart", "notice", "kStoppingPreempted", {}, restarting, notice},
      {"kStoppingForRestart", "run failed", "kStoppingForPeer", {}, restarting, peer},
      {"kStoppingForRestart", "signal", "kStoppingForSignal", {}, restarting, signal},
      {"kStoppingToSucceed", "signal", "kStoppingForSignal", {}, [](Script& s) { s.ToRunning().ExitAll(); }, signal},
      {"kStoppingPreempted", "signal", "kStoppingForSignal", {}, [](Script& s) { s.ToSaving().FailWorker(); }, signal},
      {"kStoppingForPeer", "signal", "kStoppingForSignal", {}, [](Script& s) { s.ToRunning().Feed(E::PeerFailed(std::nullopt)); },
       signal},
      {"kStoppingForSignal", "signal", "kStoppingForSignal", {}, [](Script& s) { s.ToRunning().Feed(E::Signal(kHangup)); },
       signal},
      {"kLeavingUnhealthy", "signal", "kLeavingUnhealthy", {},
       [](Script& s) { s.ToRunning().Feed(E::ExclusionRequest("ECC errors")); }, signal},
      {"kStoppingForRestart", "ended, processes stuck", "kFailed", {}, restarting,
       [](Script& s) { s.Feed(E::GroupClosed("pid 7 outlived SIGKILL")).Feed(E::AttemptEnded(true)); }},
      {"kStoppingForRestart", "ended, not charged", "kRendezvous", {},
       [](Script& s) { s.ToRunning().Feed(E::MembershipChanged(false, "node c joins")); }, end},
      {"kStoppingForRestart", "ended, restarts left", "kRendezvous", {}, restarting, end},
      {"kStoppingForRestart", "ended, restarts left, a backoff", "kBackoff", with_backoff, restarting, end},
      {"kStoppingForRestart", "ended, none left", "kConcluding", [](AgentMachineConfig& c) { c.max_restarts = 0; },
       restarting, end},
      {"kStoppingForRestart", "ended, failed at start-up", "kConcluding",
       [](AgentMachineConfig& c) {
         c.policy.fail_fast_on_startup = true;
         c.policy.min_healthy_uptime = 60s;
       },
       restarting, end},
      {"kStoppingForRestart", "ended, unfixable", "kConcluding", {}, restarting,
       [](Script& s) { s.End(true, 1, BadLaunch()); }},
      {"kStoppingForRestart", "ended during a notice", "kFailed", {},
       [](Script& s) { s.ToSaving().Feed(E::HeartbeatMissed(0, 100, 30, true)); }, end},
      {"kStoppingToSucceed", "ended", "kSucceeded", {}, [](Script& s) { s.ToRunning().ExitAll(); },
       [](Script& s) { s.End(false); }},
      {"kStoppingForSignal", "ended", "kFailed", {}, [](Script& s) { s.ToRunning().Feed(E::Signal(kHangup)); }, end},
      {"kLeavingUnhealthy", "ended", "kFailed", {}, [](Script& s) { s.ToRunning().Feed(E::ExclusionRequest("x")); },
       end},
      {"kStoppingPreempted", "ended", "kConcluding", {}, [](Script& s) { s.ToSaving().ExitAll(); },
       [](Script& s) { s.End(false); }},
      {"kStoppingForPeer", "ended", "kConcluding", {}, [](Script& s) { s.ToRunning().Feed(E::PeerFailed(std::nullopt)); },
       end},
      {"kBackoff", "backoff's end", "kRendezvous", with_backoff, backoff,
       [](Script& s) { s.Feed(E::Timer(AgentTimer::kBackoff)); }},
      {"kBackoff", "signal", "kFailed", with_backoff, backoff, signal},
      {"kBackoff", "run failed", "kConcluding", with_backoff, backoff, peer},
      {"kBackoff", "notice", "kFailed", with_backoff, backoff, notice},
      {"kConcluding", "verdict resolved", "kFailed", {}, concluding,
       [](Script& s) { s.Feed(E::VerdictResolved(std::nullopt)); }},
      {"kConcluding", "preempt verdict read", "kFailed", {}, [](Script& s) { s.ToSaving().ExitAll().End(false); },
       [](Script& s) { s.Feed(E::PreemptVerdictRead(Saved(7))); }},
      {"kConcluding", "preempt verdict read, the job finished", "kSucceeded", {},
       [](Script& s) { s.ToSaving().ExitAll().End(false); },
       [](Script& s) { s.Feed(E::PreemptVerdictRead(Finished())); }},
      {"kConcluding", "signal", "kConcluding", {}, concluding, signal},
  };
}

struct Arrow {
  std::string from, event, to;
  bool operator<(const Arrow& o) const { return std::tie(from, event, to) < std::tie(o.from, o.event, o.to); }
};

std::set<Arrow> DrawnArrows() {
  std::ifstream header(ctrun::testing::FromExeDir(CTRUN_AGENT_SOURCE_DIR) / "agent_machine.h");
  REQUIRE(header);
  const std::regex arrow(R"(^//\s+(k\w+) --(.+)--> (k\w+)\s*$)");
  std::set<Arrow> arrows;
  for (std::string line; std::getline(header, line);) {
    std::smatch m;
    if (std::regex_match(line, m, arrow)) arrows.insert({m[1], m[2], m[3]});
  }
  return arrows;
}

TEST_CASE("every arrow of the diagram is walked, and every walk is a drawn arrow") {
  const std::set<Arrow> drawn = DrawnArrows();
  REQUIRE(drawn.size() > 50);
  std::set<Arrow> walked;
  for (const Walk& w : Walks()) {
    INFO(w.from << " --" << w.event << "--> " << w.to);
    CHECK(drawn.count({w.from, w.event, w.to}) == 1);
    walked.insert({w.from, w.event, w.to});
    AgentMachineConfig config = TestConfig();
    if (w.configure) w.configure(config);
    Script s(config);
    w.reach(s);
    REQUIRE(s.m.phase() == PhasesByName().at(w.from));
    w.step(s);
    CHECK(s.m.phase() == PhasesByName().at(w.to));
  }
  for (const Arrow& a : drawn) {
    INFO("drawn but not walked: " << a.from << " --" << a.event << "--> " << a.to);
    CHECK(walked.count(a) == 1);
  }
}

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
