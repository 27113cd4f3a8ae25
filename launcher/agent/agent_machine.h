// AgentMachine: the elastic agent's decisions, pure — events and the time in,
// actions out. No I/O, no clock, no logging: it returns what to log, what to
// emit and what to do, and the Agent (agent.h, the Asio shell) does it, as
// RendezvousServer does with rdzv::Machine. Plain copyable state;
// deterministic: the same events at the same times give the same actions.
//
// Every sub-state is a Phase of its own; State is the coarse one the events
// name ("running", ...). The diagram (each arrow is walked by
// tests/launcher/agent/agent_machine_test.cc):
//
//   kInit --Start--> kRendezvous (the attempt's directories, then the
//       pre-join health check when there is one, then the round)
//   kRendezvous --round ready, workers started--> kRunning
//   kRendezvous --attempt dir, round or workers failed--> kFailed (1)
//   kRendezvous --pre-join health check failed--> kFailed (4)
//   kRendezvous --the unhealthy budget is spent--> kFailed (5)
//   kInit, kRendezvous, kBackoff --signal N--> kFailed (128+N)
//   kBackoff --its timer--> kRendezvous
//
//   kRunning --a worker failed after its group's first second, or missed
//       its heartbeat--> kStoppingForRestart (charged)
//   kRunning --a worker failed within the first second (the launch
//       window)--> kLaunchWindow --the window's end, or the last worker's
//       exit--> kStoppingForRestart (charged)
//   kRunning --membership changed--> kStoppingForRestart (charged or not)
//   kRunning --last worker exited 0--> kStoppingToSucceed
//   kRunning, kLaunchWindow --signal N--> kStoppingForSignal
//   kRunning --periodic health check failed, or an exclusion request-->
//       kLeavingUnhealthy
//   kRunning, kLaunchWindow --preemption notice--> kSaving
//   kRunning --run failed (a peer, --kill-on-bad-exit)--> kStoppingForPeer
//       (grace min(--shutdown-grace, 1 s)); kLaunchWindow waits for its end
//   kSaving --every worker exited 0, one failed, the deadline, or a second
//       SIGTERM/SIGINT--> kStoppingPreempted (the last: kStoppingForSignal)
//
//   kStoppingForRestart --membership changed, not charged--> the same, not charged
//   kStoppingForRestart --exclusion request--> kLeavingUnhealthy
//   kStoppingForRestart --notice--> kStoppingPreempted
//   kStoppingForRestart --run failed--> kStoppingForPeer
//   kStoppingForRestart, kStoppingToSucceed, kStoppingPreempted,
//       kStoppingForPeer --first signal N--> kStoppingForSignal (workers keep
//       their grace)
//   kStoppingForSignal --another signal N--> the same, SIGKILL now
//   kLeavingUnhealthy --first signal--> the same (still exit 4); another: SIGKILL now
//
//   any kStopping* --group closed and its output drained--> by the phase:
//       processes outlived SIGKILL         -> kFailed (4: stuck)
//       kStoppingForRestart, not charged   -> kRendezvous
//       kStoppingForRestart, charged: fail-fast at start-up or unfixable
//         (RestartPolicy) -> kFailed (3); restarts left -> kRendezvous or
//         kBackoff; none left -> kFailed (1 or the root cause's code);
//         during a notice -> the notice's verdict (75 or 76)
//       kStoppingToSucceed                 -> kSucceeded (0)
//       kStoppingForSignal                 -> kFailed (128+N)
//       kLeavingUnhealthy                  -> kFailed (4)
//       kStoppingPreempted                 -> kFailed (75 or 76), or kSucceeded
//       kStoppingForPeer                   -> kFailed (1)
//   kBackoff --run failed--> kFailed (1)
//   kInit, kRendezvous, kBackoff --notice--> kFailed (76: missed, no group)
//
// A failed end with a verdict passes through kConcluding (state "failed";
// signals change nothing) while the shell resolves the run's verdict
// (kResolveVerdict → VerdictResolved). kSucceeded and kFailed are final.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "launcher/agent/preemption.h"
#include "launcher/agent/restart_policy.h"
#include "launcher/agent/stop.h"
#include "launcher/cli/config.h"
#include "launcher/rdzv/rendezvous_handler.h"

namespace ctrun::launcher {

// The coarse state, as events and Agent::state() name it.
enum class AgentState { kInit, kRendezvous, kRunning, kStopping, kBackoff, kSucceeded, kFailed };
// The state's name in events ("running", ...).
const char* StateName(AgentState state);

enum class AgentPhase {
  kInit,
  kRendezvous,          // the attempt's directories, the pre-join check, the round, the workers' start
  kRunning,
  kLaunchWindow,        // running; a worker failed in the group's first second: waiting for its end
  kSaving,              // running under a preemption notice: the workers save and exit 0
  kStoppingForRestart,  // Stop's cause and charged say why
  kStoppingToSucceed,
  kStoppingForSignal,
  kLeavingUnhealthy,    // stopping; then leave the job as unhealthy (4)
  kStoppingPreempted,
  kStoppingForPeer,     // another node failed for good (--kill-on-bad-exit)
  kBackoff,
  kConcluding,          // failed; the run's verdict is being resolved
  kSucceeded,
  kFailed,
};
const char* PhaseName(AgentPhase phase);
AgentState StateOf(AgentPhase phase);

// The agent's timers; one of each at most.
enum class AgentTimer { kBackoff, kLaunchWindow, kPreemptDeadline, kPreemptWaiting, kHealth };

// What the machine needs of the configuration (AgentMachineConfig::Of).
struct AgentMachineConfig {
  int max_restarts = 0;
  RestartPolicyConfig policy;
  Duration shutdown_grace{};
  bool backoff_on = false;         // --restart-backoff > 0: restart events carry delay_s
  bool heartbeat_on = false;       // --heartbeat-timeout
  double min_healthy_uptime_s = 0;
  bool kill_on_bad_exit = true;
  std::optional<double> preempt_grace_s;  // --preempt-grace; nullopt: no notices
  int preempt_signal = 0;
  std::optional<double> slurm_job_end_unix_s;
  bool health_check = false;       // --health-check: before every join
  Duration health_interval{};      // and every this while running (0: never)
  Duration launch_window{};        // 0: none

  static AgentMachineConfig Of(const LaunchConfig& config, bool health_check, Duration launch_window);
};

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

class AgentMachine {
 public:
  explicit AgentMachine(AgentMachineConfig config);

  // Applies `event` at `now`; returns what the shell does, in order. An
  // action marked "→ kX" is answered by the shell with event kX.
  std::vector<AgentAction> Step(const AgentEvent& event, const AgentNow& now);

  AgentPhase phase() const { return phase_; }
  AgentState state() const { return StateOf(phase_); }
  int exit_code() const { return exit_code_; }
  int restart_count() const { return restart_count_; }
  int remaining_restarts() const { return remaining_restarts_; }
  // The stop under way (a kStopping* phase, kLeavingUnhealthy).
  const Stop& stop() const { return stop_; }
  bool preempting() const { return preempt_.has_value(); }
  // The group has closed during the stop under way: only its output's drain is left.
  bool group_closed() const { return stop_.group_closed; }
  // The verdict of the failed end, once concluded.
  const std::optional<rdzv::VerdictSummary>& verdict() const { return verdict_; }

  // The grace a peer's failure gives the workers' SIGTERM.
  static constexpr std::chrono::seconds kPeerFailedGrace{1};
  // How often the waiting line is logged while the workers save.
  static constexpr std::chrono::seconds kPreemptWaitingEvery{5};

 private:
  using Actions = std::vector<AgentAction>;
  // agent_machine.cc: rounds, workers, restarts.
  void BeginRendezvous(Actions& out);
  void OnAttemptPrepared(const AgentEvent& e, Actions& out);
  void OnHealthChecked(const AgentEvent& e, Actions& out);
  void OnRoundFailed(const AgentEvent& e, Actions& out);
  void OnWorkersStarted(const AgentEvent& e, Actions& out);
  void OnWorkerExited(const AgentEvent& e, Actions& out);
  bool WaitOutLaunchWindow(Actions& out);
  void StopForFailure(Actions& out, std::optional<Duration> grace = std::nullopt);
  void OnMembershipChanged(const AgentEvent& e, Actions& out);
  void OnHeartbeatMissed(const AgentEvent& e, Actions& out);
  void OnTimer(AgentTimer timer, Actions& out);
  void OnAttemptEnded(const AgentEvent& e, Actions& out);
  void Restart(Actions& out);
  void ReportFailure(std::optional<int> forced, Actions& out);
  void Finish(AgentPhase final_phase, int code, ShutdownReason reason, Actions& out);
  // agent_machine_stop.cc: the stop, signals, health, exclusion, verdicts.
  void StopGroup(int sig, AgentPhase phase, Stop stop, Actions& out, std::optional<Duration> grace = std::nullopt);
  void OnSignal(int sig, Actions& out);
  void SignalWhileLeaving(int sig, Actions& out);
  void OnExclusionRequest(const std::string& reason, Actions& out);
  void LeaveUnhealthy(const std::string& report, Actions& out);
  std::string ReportFailedCheck(const AgentEvent& e, const char* during, const char* next, Actions& out);
  void FinishFailed(int code, ShutdownReason reason, Actions& out);
  void Conclude(std::optional<rdzv::VerdictSummary> verdict, Actions& out);
  void OnPeerFailed(const std::optional<rdzv::VerdictSummary>& verdict, Actions& out);
  // agent_machine_preempt.cc: preemption notices.
  bool IsPreemptNotice(int sig) const;
  void BeginPreempt(WorkerNotice notice, bool tell_peers, Actions& out);
  void OnPeerPreempt(const PreemptNotice& peer, Actions& out);
  void PreemptWorkerExited(const AgentEvent& e, Actions& out);
  void MissPreempt(std::string why);
  void FinishPreempted(bool with_report, Actions& out);
  void FinishPreemptedWith(Actions& out);
  void ReportPreemptVerdict(int exit_code, Actions& out);

  AgentMachineConfig config_;
  RestartPolicy policy_;
  AgentNow now_;  // the event's
  AgentPhase phase_ = AgentPhase::kInit;
  int exit_code_ = 1;
  int restart_count_ = 0;
  int remaining_restarts_;
  // The attempt under way: from its workers' start to its end (kAttemptEnded).
  bool attempt_live_ = false;
  int workers_ = 0;
  int running_ = 0;
  TimePoint started_{};
  std::optional<int> hung_local_rank_;
  Stop stop_;  // meaningful in the kStopping* phases and kLeavingUnhealthy
  // The last ended attempt had failures (the shell holds them), and its
  // report's exit code without a forced one.
  bool ended_with_failures_ = false;
  int report_code_ = 1;
  // The preemption notice (set once: the job ends with it), when it began,
  // its deadline, its verdict once decided; a FinishPreempted waiting to
  // read the verdict prints the failure report (`preempt_report_`).
  std::optional<WorkerNotice> preempt_;
  TimePoint preempt_began_{};
  TimePoint preempt_deadline_{};
  std::optional<PreemptVerdict> preempt_verdict_;
  bool preempt_report_ = false;
  // Another node failed for good; its verdict when it sent one.
  bool peer_failed_ = false;
  std::optional<rdzv::VerdictSummary> peer_verdict_;
  // kConcluding: the code and reason the end will have.
  int concluding_code_ = 1;
  ShutdownReason concluding_reason_ = ShutdownReason::kFailed;
  std::optional<rdzv::VerdictSummary> verdict_;
};

}  // namespace ctrun::launcher
