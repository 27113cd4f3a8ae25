// AgentMachine's diagram (launcher/agent/agent_machine.h), walked: every
// arrow it draws (read from the header) is walked by a script here, and
// every walk here is a drawn arrow; an arrow drawn without a walk, or a
// walk of no drawn arrow, fails.
#include <fstream>
#include <map>
#include <regex>

#include "tests/launcher/agent/agent_script.h"
#include "tests/source_path.h"

namespace ctrun::launcher {
namespace {

using namespace std::chrono_literals;
using namespace agent_script;

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

}  // namespace
}  // namespace ctrun::launcher
