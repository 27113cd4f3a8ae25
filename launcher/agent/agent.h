// Agent: the elastic agent of one node — a small state machine on one Asio
// loop that runs rounds of the local worker group.
//
// Events: a round is ready, a worker exited (WorkerGroup's exit callback,
// never polling), membership changed (rendezvous push), a handled signal
// arrived, a worker missed its heartbeat, the group's close completed, a
// worker's output tee drained. A restart always replaces the whole local
// group. Every way out of kRunning is one Stop (below) through StopGroup:
// the group is closed (SIGTERM, SIGKILL after the shutdown grace), its tees
// drain, and then the stop's `then` decides what comes next.
//
//   kInit --Start--> kRendezvous --round ready, workers started--> kRunning
//   kRendezvous --round failed, attempt dir or workers failed--> kFailed (1)
//   kInit, kRendezvous, kBackoff --signal N--> kFailed (128+N)
//   kBackoff --the restart delay's timer--> kRendezvous
//   kBackoff --membership changed--> kBackoff (no group runs; the next round
//       sees the new membership)
//
//   kRunning --worker failed, heartbeat missed----> kStopping{restart, charged}
//       (a failure within the launch window's first second waits for the
//       window's end or the last worker's exit: WaitOutLaunchWindow)
//   kRunning --membership changed (charged or not)--> kStopping{restart, charged?}
//   kRunning --last worker exited 0----------------> kStopping{succeed}
//   kRunning --signal N----------------------------> kStopping{exit for signal N}
//
//   kStopping{restart, charged} --membership changed, not charged-->
//       the same stop, not charged (a peer's loss failed our worker first)
//   kStopping{restart or succeed} --first signal N-->
//       the same stop, then exit for signal N (workers keep their grace)
//   kStopping{exit for signal} --another signal N-->
//       the same stop, SIGKILL now, exit for signal N
//
//   kStopping --group closed and tees drained--> by the stop's `then`:
//       restart, not charged               -> kRendezvous
//       restart, charged, fail-fast says the first attempt failed at
//         start-up (RestartPolicy)         -> kFailed (failure report; 3)
//       restart, charged, restarts left    -> kRendezvous (restart_count + 1),
//                                             or kBackoff when RestartPolicy
//                                             gives a delay (--restart-backoff)
//       restart, charged, none left        -> kFailed (failure report; 1 or
//                                             the root cause's code)
//       succeed                            -> kSucceeded (0)
//       exit for signal N                  -> kFailed (128+N)
//   kStopping{peer failed} --group closed and tees drained--> kFailed (1)
//   kStopping --close gave up: processes left --kill-timeout after SIGKILL-->
//       kFailed (4; which pids, in what state; leaves the rendezvous as
//       unhealthy), whatever the stop's `then`
//
// Node health (--health-check, CTRUN_EXCLUDE_NODE_FILE; SetHealthCheck):
//   kRendezvous: the check runs before every join; it failed (or timed
//       out) --> kFailed (4), leaving the rendezvous as unhealthy
//   kRunning --the periodic check failed (--health-check-interval), or a
//       worker asked to exclude the node--> kStopping{leave unhealthy}
//   kStopping{restart} --a worker asked to exclude the node-->
//       the same stop, then leave unhealthy
//   kStopping{leave unhealthy} --first signal N-->
//       the same stop (workers keep their grace); still exit 4, not 128+N
//   kStopping{leave unhealthy} --another signal N-->
//       the same stop, SIGKILL now; still exit 4
//   kStopping{leave unhealthy} --group closed and tees drained-->
//       kFailed (4; the report on stderr and in the "node_unhealthy" event;
//       the rendezvous records it, the other nodes restart without it)
//   kRendezvous --the run was closed for --max-unhealthy-nodes--> kFailed (5)
//
// Preemption (--preempt-grace; agent_preempt.cc). A notice is SIGTERM,
// SIGINT or --preempt-signal received first, or a peer's notice pushed by
// the rendezvous; it writes CTRUN_PREEMPT_FILE for the workers and is sent
// on to the other nodes:
//   kRunning --notice--> kRunning{notice}: the workers save and exit 0
//   kRunning{notice} --every worker exited 0, or one failed, or the
//       deadline passed, or a second SIGTERM/SIGINT--> kStopping{preempted}
//       (the last: kStopping{exit for signal N} as above)
//   kRunning{notice} --membership changed--> ignored (saved peers leave)
//   kStopping{restart} --notice--> kStopping{preempted}
//   kInit, kRendezvous, kBackoff --notice--> kFailed (76: missed, no group)
//   kStopping{preempted} --group closed and tees drained--> kFailed: 75
//       when every worker wrote the same step to its CTRUN_PREEMPT_SAVED_FILE
//       ("preempt_saved"), else 76 ("preempt_missed", with why); the node
//       leaves the rendezvous without closing it. A restart is never begun
//       during a notice.
//
// A peer's failure (--kill-on-bad-exit 1, the default; agent_verdict.cc):
// another node failed for good and closed the run (Closed{failed_exit}):
//   kRunning --run failed--> kStopping{peer failed}, the workers SIGKILLed
//       after at most kPeerFailedGrace of their SIGTERM (during a launch
//       window's wait, when that window ends: a bad launch is still told)
//   kStopping{restart or succeed} --run failed--> the same stop, then kFailed (1)
//   kBackoff --run failed--> kFailed (1)
//   kRendezvous: the join is refused (the run is closed) --> kFailed (1)
// Every failed end with failures names a verdict (verdict_line.h): this
// node's own, or the run's from the rendezvous when this node's root cause
// may be a consequence (ResolveVerdict), or the peer's that closed the run;
// it is the agent's last line on stderr, the `finished` event's cause_*
// fields, and what the Leave carries to the other nodes.
//
// Restarts no restart can fix (RestartPolicy's unfixable: a bad launch, the
// same error twice in a row) end the job: kStopping{restart, charged}
// --group closed--> kFailed (3, do not requeue), unless
// --restart-on-any-failure.
//
// kSucceeded and kFailed are final: the rendezvous is shut down and `io` is
// stopped. A signal arriving then (while the rendezvous is left) changes
// nothing; the leave is bounded by the rendezvous's own timeouts
// (close_timeout, --exit-barrier-timeout on the hosting node). A worker
// failure seen after a signal is not reported.
//
// With --heartbeat-timeout, a worker that stops touching its heartbeat file
// counts as a failed worker (launcher/liveness/heartbeat.h).
//
// With an EventLog, each event above but the close and the drain is also
// written there as a JSON line, and so are the restart and the end.
//
// Files: agent.cc (rounds, workers, restarts), agent_stop.cc (the stop, and
// signals), node_health.cc (the health check, exclusion requests, the
// unhealthy leave). Each started group is one Attempt (attempt.h); its
// specs and tee plan come from worker_specs.h, its failure report from
// failure_report.h, its step reports from a StepReporter (stragglers.h), its
// heartbeat and step watches from a LivenessWatchers (launcher/liveness/
// watch.h; the real ones unless SetLivenessWatchers says otherwise).
//
// The workers' c10d store, when this agent hosts it (`store` not null), is
// cleared at the start of every rendezvous: each round's group starts from an
// empty store with no clients.
//
// Ownership: borrows everything given to the constructor and the setters;
// all of it must outlive the Agent. Thread model: io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/agent/attempt.h"
#include "launcher/agent/preemption.h"
#include "launcher/agent/restart_policy.h"
#include "launcher/agent/stop.h"
#include "launcher/agent/stragglers.h"
#include "launcher/cli/config.h"
#include "launcher/cli/exit_codes.h"
#include "launcher/health/health_check.h"
#include "launcher/liveness/watch.h"
#include "launcher/logs/event_log.h"
#include "launcher/logs/log_dir.h"
#include "launcher/logs/ship/log_shipper.h"
#include "launcher/process/worker_env.h"
#include "launcher/process/worker_group.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "rendezvous/store/store_server.h"

namespace ctrun::launcher {

class Agent {
 public:
  // kBackoff: waiting --restart-backoff's delay before the next rendezvous.
  enum class State { kInit, kRendezvous, kRunning, kStopping, kBackoff, kSucceeded, kFailed };

  // `workers` is the local group this agent starts and stops (a WorkerSet in
  // ctrun); `rdzv` forms its rounds.
  Agent(boost::asio::io_context& io, const LaunchConfig& config, Environment env,
        RendezvousHandler& rdzv, WorkerGroup& workers, RunLogDir log_dir,
        rdzv::StoreServer* store = nullptr, EventLog* events = nullptr);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Installs handlers for config.signals_to_handle and starts the first
  // rendezvous. When the agent is done it stops `io`; then exit_code() is
  // final.
  void Start();
  // --numa-binding: the binding of each local rank (index = local rank),
  // given to its worker at every start and named in its events and its
  // failure report. Call before Start; none by default.
  void SetWorkerBindings(std::vector<WorkerBinding> bindings) { bindings_ = std::move(bindings); }
  // --health-check: runs `check` before every join and, with
  // --health-check-interval, while the workers run (borrowed; must outlive
  // the Agent). Call before Start; none by default.
  void SetHealthCheck(HealthChecker* check) { health_ = check; }
  // Called with each round that completed, before its workers start (on
  // the agent's thread): fault tolerance learns the node's group rank.
  void SetRoundObserver(std::function<void(const Round&)> observer) { round_observer_ = std::move(observer); }
  // What watches each group's heartbeat files and step times
  // (--heartbeat-timeout; borrowed; must outlive the Agent). Call before
  // Start; RealLivenessWatchers() by default.
  void SetLivenessWatchers(LivenessWatchers* watchers) { liveness_ = watchers; }
  // How long a group's workers run on after one failed early, to tell a bad
  // launch from one rank's failure (WaitOutLaunchWindow); kBadLaunchWindowS
  // by default, 0 for none. Call before Start.
  void SetLaunchWindow(Duration window) { launch_window_ = window; }
  // The file a worker writes to ask for this node's exclusion
  // (CTRUN_EXCLUDE_NODE_FILE): <run log dir>/exclude_node.
  std::string ExcludeNodeFile() const;
  // Acts on `sig` as on a handled signal received (see the diagram above).
  // Start routes the real ones here; tests call it directly.
  void HandleSignal(int sig);

  int exit_code() const { return exit_code_; }
  State state() const { return state_; }

 private:
  // agent.cc: rounds, workers, restarts.
  void BeginRendezvous();
  void OnRound(const Result<Round>& round);
  void StartWorkers(const Round& round);
  AttemptInputs Inputs() const;
  void EmitWorkersStarted();
  void StartHeartbeat();
  void OnWorkerExit(const WorkerExit& exit);
  bool WaitOutLaunchWindow();
  Stop StopForFailure() const;
  void EmitWorkerExited(const WorkerExit& exit);
  void RecordFailure(const WorkerExit& exit);
  void OnMembershipChange(bool charged, const std::string& why);
  void OnHeartbeatMiss(const HeartbeatMiss& miss);
  void ArmSignals();
  void Restart(const Stop& stop, const std::vector<WorkerFailure>& failures);
  // Waits `delay` in kBackoff, then begins the next rendezvous.
  void BackOff(Duration delay);
  void Finish(State final_state, int code, ShutdownReason reason);
  // Prints the failure report of `failures` and finishes with `code`, or
  // (nullopt) with 1 or the root cause's own code (--exit-code-from-root-cause).
  void ReportFailure(const std::vector<WorkerFailure>& failures, std::optional<int> code = std::nullopt);
  // ReportFailure's report (none for no failures); returns the exit code it chose.
  int PrintFailureReport(const std::vector<WorkerFailure>& failures, std::optional<int> code);
  void StopAtStartup(const Stop& stop, const std::vector<WorkerFailure>& failures);
  // Prints the one line for a failure no restart fixes and ends the job
  // with kExitDoNotRequeue.
  void StopUnfixable(const Stop& stop, const std::string& why, const std::vector<WorkerFailure>& failures);

  // agent_verdict.cc: the verdict (launcher/agent/agent.h's diagram).
  // Finishes as failed with `code`: first the verdict (the peer's, or
  // ResolveVerdict of this node's last failure report's), printed as the
  // last line and carried by the Leave, then Finish.
  void FinishFailed(int code, ShutdownReason reason);
  void OnPeerFailed(const std::optional<rdzv::VerdictSummary>& verdict);
  // The workers could not be started (`error`): their bad-launch records are
  // reported, then FinishFailed(1).
  void FailToStart(const Round& round, const std::string& error);
  // The grace a peer's failure gives the workers' SIGTERM.
  static constexpr std::chrono::seconds kPeerFailedGrace{1};

  // agent_stop.cc. The one way to stop the group: sends `sig` (SIGKILL
  // after the grace), makes `stop` the stop under way, and ends it once the
  // group is closed and its tees have drained. Called again during a stop
  // (a second signal), it escalates that stop to SIGKILL and replaces it.
  void StopGroup(int sig, Stop stop, std::optional<Duration> grace = std::nullopt);
  void OnGroupClosed(const std::vector<StuckProcess>& stuck);
  // Ends the stop under way, and with it the attempt, if its group is closed
  // and every tee drained; returns whether it did.
  bool EndStopIfDrained();
  // Signals while a stop is under way (HandleSignal in kRunning, kStopping).
  void SignalWhileLeaving(int sig);
  bool SignalReceived() const;

  // agent_preempt.cc: preemption (--preempt-grace; launcher/agent/preemption.h).
  // A signal that begins a notice: SIGTERM, SIGINT or --preempt-signal, with
  // --preempt-grace, before any notice.
  bool IsPreemptNotice(int sig) const;
  WorkerNotice LocalNotice(int sig) const;
  // Tells the workers (the notice file), the events file and, for a local
  // notice, the other nodes; then by state: running, the deadline's timer;
  // stopping for a restart, the stop ends the job instead; no group, the
  // notice is missed at once.
  void BeginPreempt(WorkerNotice notice, bool tell_peers);
  void OnPeerPreempt(const PreemptNotice& notice);
  void OnPreemptDeadline();
  // Logs PreemptWaitingLine every kPreemptWaitingEvery while the workers save.
  void ArmPreemptWaitingLine();
  static constexpr std::chrono::seconds kPreemptWaitingEvery{5};
  // This attempt's workers' CTRUN_PREEMPT_SAVED_FILE paths, by local rank.
  std::vector<std::string> PreemptMarkers() const;
  void PreemptWorkerExited(const WorkerExit& exit);
  // The notice's verdict is "missed: `why`" (the first reason stays).
  void MissPreempt(std::string why);
  // Reads the verdict from the markers (unless missed already), reports it
  // (event, stderr, the failure report of `failures`) and finishes with 75 or 76.
  void FinishPreempted(const std::vector<WorkerFailure>& failures);
  // The decided verdict's stderr line (naming `exit_code`) and its
  // preempt_saved / preempt_missed event.
  void ReportPreemptVerdict(int exit_code);

  // node_health.cc: node health (launcher/health/).
  void OnPreJoinCheck(const HealthResult& result);
  void ArmHealthTimer();
  void OnPeriodicCheck(const HealthResult& result);
  // A failed check's one error line ("health check ... `next`", next starting
  // with "; ") and node_unhealthy event
  // (`during`: rendezvous or running); returns the report the node leaves with.
  std::string ReportFailedCheck(const HealthResult& result, const char* during, const char* next);
  void OnExclusionRequest(const std::string& reason);
  void StopHealthWatch();
  // Says why on stderr, then finishes with kExitNodeUnhealthy, leaving the
  // rendezvous as unhealthy with `report`.
  void LeaveUnhealthy(const std::string& report);

  boost::asio::io_context& io_;
  const LaunchConfig& config_;
  Environment env_;
  RendezvousHandler& rdzv_;
  WorkerGroup& workers_;
  RunLogDir log_dir_;
  rdzv::StoreServer* store_;  // null: this agent hosts no store
  EventLog* events_;    // null: no --events-file
  boost::asio::signal_set signals_;
  boost::asio::steady_timer backoff_timer_;  // armed exactly while state_ is kBackoff
  RestartPolicy policy_;
  std::vector<WorkerBinding> bindings_;          // --numa-binding; empty: none
  HealthChecker* health_ = nullptr;              // --health-check; null: none
  std::function<void(const Round&)> round_observer_;  // SetRoundObserver; empty: none
  LivenessWatchers* liveness_;                   // never null
  boost::asio::steady_timer health_timer_;       // --health-check-interval, armed while kRunning

  State state_ = State::kInit;
  int exit_code_ = kExitFailure;
  int restart_count_ = 0;
  int remaining_restarts_;
  // The attempt under way: made by StartWorkers, destroyed when its stop has
  // drained (so set exactly in kRunning and kStopping), or by Finish when its
  // workers could not start.
  // --share-logs with a rendezvous that keeps logs: made in Start, stopped
  // (flushed for at most kShareLogsFlush) in Finish. Declared before the
  // attempt and the ended tees, which hand it lines: destroyed after them.
  std::unique_ptr<LogShipper> shipper_;
  std::unique_ptr<Attempt> attempt_;
  std::optional<Stop> stop_;  // set exactly while state_ is kStopping
  // The last ended attempt's tees (attempt.h): dropped at the next start.
  std::unique_ptr<AttemptTees> ended_tees_;
  StepReporter steps_;  // watching exactly while attempt_ has a heartbeat watch
  // The preemption notice under way (set once, never cleared: the job ends
  // with it), when it began, and its verdict once decided.
  std::optional<WorkerNotice> preempt_;
  TimePoint preempt_began_{};
  std::optional<PreemptVerdict> preempt_verdict_;
  // The last failed attempt's report to the rendezvous (this node's
  // verdict); the steps of its failures, by index.
  std::optional<RendezvousHandler::FailureReport> last_report_;
  // Another node failed for good (OnPeerFailed); its verdict when it sent one.
  bool peer_failed_ = false;
  std::optional<rdzv::VerdictSummary> peer_verdict_;
  // The verdict of the failed end (FinishFailed): the `finished` event's.
  std::optional<rdzv::VerdictSummary> verdict_;
  boost::asio::steady_timer preempt_timer_;  // the notice's deadline, armed while kRunning
  boost::asio::steady_timer preempt_waiting_timer_;  // the waiting line's, every 5 s until then
  Duration launch_window_ = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(rdzv::kBadLaunchWindowS));
  boost::asio::steady_timer launch_window_timer_;  // armed while a group waits out its launch window
};

// The state's name in events ("running", ...).
const char* StateName(Agent::State state);

}  // namespace ctrun::launcher
