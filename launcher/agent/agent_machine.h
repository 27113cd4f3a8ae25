// AgentMachine: the elastic agent's decisions, pure — events and the time in,
// actions out. No I/O, no clock, no logging: it returns what to log, what to
// emit and what to do, and the Agent (agent.h, the Asio shell) does it, as
// RendezvousServer does with rdzv::Machine. Plain copyable state;
// deterministic: the same events at the same times give the same actions.
//
// Every sub-state is a Phase of its own; State is the coarse one the events
// name ("running", ...).
//
// The diagram: one arrow a line, `from --event--> to`, each walked by
// tests/launcher/agent/agent_machine_walk_test.cc (which reads these lines).
//
//   kInit --start--> kRendezvous
//   kInit --signal--> kFailed
//   kInit --notice--> kFailed
//   kRendezvous --workers started--> kRunning
//   kRendezvous --attempt dir failed--> kFailed
//   kRendezvous --round failed--> kFailed
//   kRendezvous --unhealthy budget spent--> kFailed
//   kRendezvous --round failed, a peer failed--> kConcluding
//   kRendezvous --workers failed to start--> kConcluding
//   kRendezvous --pre-join check failed--> kFailed
//   kRendezvous --signal--> kFailed
//   kRendezvous --notice--> kFailed
//   kRunning --worker failed--> kStoppingForRestart
//   kRunning --worker failed in the first second--> kLaunchWindow
//   kRunning --heartbeat missed--> kStoppingForRestart
//   kRunning --membership changed--> kStoppingForRestart
//   kRunning --last worker exited 0--> kStoppingToSucceed
//   kRunning --signal--> kStoppingForSignal
//   kRunning --periodic check failed--> kLeavingUnhealthy
//   kRunning --exclusion request--> kLeavingUnhealthy
//   kRunning --notice--> kSaving
//   kRunning --run failed--> kStoppingForPeer
//   kLaunchWindow --window's end--> kStoppingForRestart
//   kLaunchWindow --last worker exited--> kStoppingForRestart
//   kLaunchWindow --window's end, a peer failed--> kStoppingForPeer
//   kLaunchWindow --run failed--> kLaunchWindow
//   kLaunchWindow --signal--> kStoppingForSignal
//   kLaunchWindow --notice--> kSaving
//   kSaving --every worker exited 0--> kStoppingPreempted
//   kSaving --worker failed--> kStoppingPreempted
//   kSaving --deadline--> kStoppingPreempted
//   kSaving --second signal--> kStoppingForSignal
//   kSaving --membership changed--> kSaving
//   kSaving --run failed--> kSaving
//   kSaving --heartbeat missed--> kStoppingForRestart
//   kStoppingForRestart --membership changed, not charged--> kStoppingForRestart
//   kStoppingForRestart --exclusion request--> kLeavingUnhealthy
//   kStoppingForRestart --notice--> kStoppingPreempted
//   kStoppingForRestart --run failed--> kStoppingForPeer
//   kStoppingForRestart --signal--> kStoppingForSignal
//   kStoppingToSucceed --signal--> kStoppingForSignal
//   kStoppingPreempted --signal--> kStoppingForSignal
//   kStoppingForPeer --signal--> kStoppingForSignal
//   kStoppingForSignal --signal--> kStoppingForSignal
//   kLeavingUnhealthy --signal--> kLeavingUnhealthy
//   kStoppingForRestart --ended, processes stuck--> kFailed
//   kStoppingForRestart --ended, not charged--> kRendezvous
//   kStoppingForRestart --ended, restarts left--> kRendezvous
//   kStoppingForRestart --ended, restarts left, a backoff--> kBackoff
//   kStoppingForRestart --ended, none left--> kConcluding
//   kStoppingForRestart --ended, failed at start-up--> kConcluding
//   kStoppingForRestart --ended, unfixable--> kConcluding
//   kStoppingForRestart --ended during a notice--> kFailed
//   kStoppingToSucceed --ended--> kSucceeded
//   kStoppingForSignal --ended--> kFailed
//   kLeavingUnhealthy --ended--> kFailed
//   kStoppingPreempted --ended--> kConcluding
//   kStoppingForPeer --ended--> kConcluding
//   kBackoff --backoff's end--> kRendezvous
//   kBackoff --signal--> kFailed
//   kBackoff --run failed--> kConcluding
//   kBackoff --notice--> kFailed
//   kConcluding --verdict resolved--> kFailed
//   kConcluding --preempt verdict read--> kFailed
//   kConcluding --preempt verdict read, the job finished--> kSucceeded
//   kConcluding --signal--> kConcluding
//
// What each arrow means, and the exit codes:
// - The round: the attempt's directories first, then the pre-join health
//   check (--health-check) when there is one, then the join. A failed check
//   leaves as unhealthy (4); a spent --max-unhealthy-nodes budget is 5; any
//   other failure 1; a signal N is 128+N.
// - A worker failing within its group's first second (the launch window,
//   kBadLaunchWindowS) lets the others run to that second's end, or to their
//   own exit, so that a bad launch (IsBadLaunch) is told from one rank's
//   failure. A missed heartbeat counts as a failed worker (its stacks saved).
// - A membership change restarts uncharged when the rendezvous says so (a
//   scale-up); one that comes during a charged restart makes it uncharged (a
//   peer's loss failed our worker first).
// - The first signal during a stop lets the workers keep their SIGTERM's
//   grace; the stop then ends with 128+N. A second one SIGKILLs them now.
//   Leaving as unhealthy keeps its exit 4 and report whatever signal comes.
// - Preemption (--preempt-grace): a notice is SIGTERM, SIGINT or
//   --preempt-signal received first, or a peer's notice; it writes the
//   notice file and goes to the other nodes. The workers save and exit 0;
//   the end is 75 when every worker wrote the same step to its marker, else
//   76 (missed, with why). A restart is never begun during a notice.
// - A peer's failure (--kill-on-bad-exit 1, the default): another node
//   failed for good and closed the run. Running workers get SIGTERM and at
//   most kPeerFailedGrace before SIGKILL; a restart or backoff under way
//   ends instead (1). With 0, the workers run on, as under torchrun.
// - A stop's end (its group closed, its output drained): processes that
//   outlived SIGKILL (--kill-timeout) end the job (4, leaving as
//   unhealthy). A charged restart asks RestartPolicy: fail-fast at start-up
//   or a failure no restart fixes (a bad launch, the same error twice) end
//   it (3, do not requeue); else it restarts while --max-restarts allows,
//   after --restart-backoff's delay, or ends (1, or the root cause's code).
// - Every failed end with failures names a verdict (verdict_line.h): this
//   node's, or the run's resolved by the shell (kConcluding), or the peer's
//   that closed the run; it is the last line logged, the `finished` event's
//   cause_* fields, and what the Leave carries to the other nodes.
// kSucceeded and kFailed are final: a signal then changes nothing.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "launcher/agent/agent_events.h"
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
