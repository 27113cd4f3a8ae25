// A script of AgentMachine events (launcher/agent/agent_machine.h) for its
// tests: one machine, its own clock (time moves only when the script says
// so), every step's actions kept, and the steps that reach each phase. Test
// code: each test file includes it once.
#pragma once

#include <signal.h>

#include <catch2/catch.hpp>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "launcher/agent/agent_machine.h"
#include "launcher/cli/exit_codes.h"

namespace ctrun::launcher {
namespace agent_script {

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

// TestConfig with a pre-join and a periodic (10 s) health check.
AgentMachineConfig WithHealth() {
  AgentMachineConfig c = TestConfig();
  c.health_check = true;
  c.health_interval = 10s;
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

}  // namespace agent_script
}  // namespace ctrun::launcher
