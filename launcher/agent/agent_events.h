// The AgentMachine's events and actions (agent_machine.h): plain values,
// one struct each with a named constructor per event kind, so the shell and
// the tests script the machine alike. An action marked "→ kX" is answered by
// the shell with event kX.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "launcher/agent/preemption.h"
#include "launcher/agent/restart_policy.h"
#include "launcher/rdzv/rendezvous_handler.h"

namespace ctrun::launcher {

// The agent's timers; one of each at most.
enum class AgentTimer { kBackoff, kLaunchWindow, kPreemptDeadline, kPreemptWaiting, kHealth };
inline constexpr int kAgentTimers = 5;

// The time of an event: the steady clock, and the wall clock for deadlines
// the workers read.
struct AgentNow {
  TimePoint steady{};
  double unix_s = 0;
};

struct AgentEvent {
  enum class Kind {
    kStart,
    kAttemptPrepared,   // ok, text (the error)
    kHealthChecked,     // ok (healthy), periodic, command, text (the failure), report, last_lines
    kRoundFailed,       // text, budget
    kRoundReady,        // round
    kWorkersStarted,    // ok, workers, text (the error)
    kWorkerExited,      // local_rank, rank, pid, exit_code
    kMembershipChanged, // charged, text (why)
    kHeartbeatMissed,   // local_rank, pid, silent_for_s, ever_touched
    kSignal,            // signal
    kPeerPreempt,       // peer_notice
    kPeerFailed,        // verdict
    kTimer,             // timer
    kExclusionRequest,  // text (the reason)
    kGroupClosed,       // report (non-empty: processes outlived SIGKILL; the stuck report)
    kAttemptEnded,      // failures, report_code, notes (bad_launch, failure, heartbeat_touched)
    kPreemptVerdictRead,  // preempt_verdict
    kVerdictResolved,   // verdict
  };
  Kind kind = Kind::kStart;
  bool ok = true;
  bool periodic = false;
  bool budget = false;
  bool charged = false;
  bool ever_touched = false;
  bool failures = false;
  int local_rank = -1;
  int rank = -1;
  int pid = 0;
  int exit_code = 0;
  int signal = 0;
  int workers = 0;
  int report_code = 1;
  double silent_for_s = 0;
  std::string text;
  std::string command;
  std::string report;
  std::vector<std::string> last_lines;
  AgentTimer timer = AgentTimer::kBackoff;
  Round round;
  PreemptNotice peer_notice;
  std::optional<rdzv::VerdictSummary> verdict;
  AttemptEnd notes;
  PreemptVerdict preempt_verdict;

  // One named constructor per kind (the shell's and the tests' scripts).
  static AgentEvent Of(Kind kind) {
    AgentEvent e;
    e.kind = kind;
    return e;
  }
  static AgentEvent Start() { return Of(Kind::kStart); }
  static AgentEvent AttemptPrepared(bool ok, std::string error = "") {
    AgentEvent e = Of(Kind::kAttemptPrepared);
    e.ok = ok;
    e.text = std::move(error);
    return e;
  }
  static AgentEvent RoundReady(Round round) {
    AgentEvent e = Of(Kind::kRoundReady);
    e.round = std::move(round);
    return e;
  }
  static AgentEvent RoundFailed(std::string error, bool budget) {
    AgentEvent e = Of(Kind::kRoundFailed);
    e.text = std::move(error);
    e.budget = budget;
    return e;
  }
  static AgentEvent WorkersStarted(int workers) {
    AgentEvent e = Of(Kind::kWorkersStarted);
    e.workers = workers;
    return e;
  }
  static AgentEvent StartFailed(std::string error) {
    AgentEvent e = Of(Kind::kWorkersStarted);
    e.ok = false;
    e.text = std::move(error);
    return e;
  }
  static AgentEvent WorkerExited(int local_rank, int rank, int pid, int exit_code) {
    AgentEvent e = Of(Kind::kWorkerExited);
    e.local_rank = local_rank;
    e.rank = rank;
    e.pid = pid;
    e.exit_code = exit_code;
    return e;
  }
  static AgentEvent MembershipChanged(bool charged, std::string why) {
    AgentEvent e = Of(Kind::kMembershipChanged);
    e.charged = charged;
    e.text = std::move(why);
    return e;
  }
  static AgentEvent HeartbeatMissed(int local_rank, int pid, double silent_for_s, bool ever_touched) {
    AgentEvent e = Of(Kind::kHeartbeatMissed);
    e.local_rank = local_rank;
    e.pid = pid;
    e.silent_for_s = silent_for_s;
    e.ever_touched = ever_touched;
    return e;
  }
  static AgentEvent Signal(int sig) {
    AgentEvent e = Of(Kind::kSignal);
    e.signal = sig;
    return e;
  }
  static AgentEvent PeerPreempt(PreemptNotice notice) {
    AgentEvent e = Of(Kind::kPeerPreempt);
    e.peer_notice = std::move(notice);
    return e;
  }
  static AgentEvent PeerFailed(std::optional<rdzv::VerdictSummary> verdict) {
    AgentEvent e = Of(Kind::kPeerFailed);
    e.verdict = std::move(verdict);
    return e;
  }
  static AgentEvent Timer(AgentTimer timer) {
    AgentEvent e = Of(Kind::kTimer);
    e.timer = timer;
    return e;
  }
  static AgentEvent ExclusionRequest(std::string reason) {
    AgentEvent e = Of(Kind::kExclusionRequest);
    e.text = std::move(reason);
    return e;
  }
  // `stuck_report` not empty: processes outlived SIGKILL (StuckReport).
  static AgentEvent GroupClosed(std::string stuck_report = "") {
    AgentEvent e = Of(Kind::kGroupClosed);
    e.report = std::move(stuck_report);
    return e;
  }
  static AgentEvent AttemptEnded(bool failures, int report_code = 1, AttemptEnd notes = {}) {
    AgentEvent e = Of(Kind::kAttemptEnded);
    e.failures = failures;
    e.report_code = report_code;
    e.notes = std::move(notes);
    return e;
  }
  static AgentEvent PreemptVerdictRead(PreemptVerdict verdict) {
    AgentEvent e = Of(Kind::kPreemptVerdictRead);
    e.preempt_verdict = std::move(verdict);
    return e;
  }
  static AgentEvent VerdictResolved(std::optional<rdzv::VerdictSummary> verdict) {
    AgentEvent e = Of(Kind::kVerdictResolved);
    e.verdict = std::move(verdict);
    return e;
  }
  // `report`: FormatHealthReport's, when not healthy.
  static AgentEvent HealthChecked(bool periodic, bool healthy, std::string command = "", std::string failure = "",
                                  std::string report = "", std::vector<std::string> last_lines = {}) {
    AgentEvent e = Of(Kind::kHealthChecked);
    e.periodic = periodic;
    e.ok = healthy;
    e.command = std::move(command);
    e.text = std::move(failure);
    e.report = std::move(report);
    e.last_lines = std::move(last_lines);
    return e;
  }
};

struct AgentAction {
  enum class Kind {
    kLog,               // level, text
    kEmit,              // text (the event's name), fields
    kPrepareAttempt,    // restart_count → kAttemptPrepared
    kClearStore,
    kRunHealthCheck,    // flag (periodic, else before the join) → kHealthChecked
    kNextRound,         // → kRoundReady or kRoundFailed
    kObserveRound,      // the round observer sees the round just ready
    kStartWorkers,      // the round just ready → kWorkersStarted
    kReportExecFailure, // text: the workers could not be started; their report to the rendezvous
    kWatchWorkers,      // worker_started events, heartbeat and step watches, output tees
    kRecordFailure,     // local_rank, flag (stopping), hung (the heartbeat's), seconds (runtime)
    kSaveStacks,        // local_rank, text (why)
    kCloseGroup,        // signal, grace, flag (the attempt's first close)
    kEndWhenDrained,    // end the attempt once its output is drained → kAttemptEnded
    kArmTimer,          // timer, grace (the delay)
    kCancelTimer,       // timer
    kCancelHealthCheck,
    kWriteNotice,       // notice
    kSendPreemptNotice, // peer_notice
    kLogPreemptWaiting, // workers, running, seconds (stop in)
    kReadPreemptVerdict,  // → kPreemptVerdictRead
    kPrintFailureReport,  // code (forced; nullopt: none)
    kReportStuck,
    kSetUnhealthyReport,  // text
    kPrintUnhealthy,      // text (the report)
    kResolveVerdict,      // → kVerdictResolved
    kSetFailureVerdict,   // verdict
    kFinish,              // reason, flag (succeeded: remove a temporary log dir)
  };
  enum class Level { kInfo, kWarn, kError };
  Kind kind = Kind::kLog;
  Level level = Level::kInfo;
  std::string text;
  nlohmann::ordered_json fields;
  int restart_count = 0;
  int local_rank = -1;
  int signal = 0;
  int workers = 0;
  int running = 0;
  bool flag = false;
  bool hung = false;
  double seconds = 0;
  Duration grace{};
  AgentTimer timer = AgentTimer::kBackoff;
  WorkerNotice notice;
  PreemptNotice peer_notice;
  std::optional<int> code;
  ShutdownReason reason = ShutdownReason::kFailed;
  std::optional<rdzv::VerdictSummary> verdict;
};

}  // namespace ctrun::launcher
