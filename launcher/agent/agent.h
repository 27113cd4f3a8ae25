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
// The workers' c10d store, when this agent hosts it (`store` not null), is
// cleared at the start of every rendezvous: each round's group starts from an
// empty store with no clients.
//
// Ownership: borrows everything given to the constructor; all of it must
// outlive the Agent. Thread model: io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/config.h"
#include "launcher/cli/exit_codes.h"
#include "launcher/health/exclusion_request.h"
#include "launcher/health/health_check.h"
#include "launcher/logs/event_log.h"
#include "launcher/logs/filtered_log.h"
#include "launcher/liveness/heartbeat.h"
#include "launcher/liveness/step_watcher.h"
#include "launcher/logs/log_dir.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "launcher/logs/report.h"
#include "rendezvous/store/store_server.h"
#include "launcher/logs/stream_tee.h"
#include "launcher/process/worker_env.h"
#include "launcher/process/worker_group.h"
#include "launcher/agent/restart_policy.h"

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
  // The file a worker writes to ask for this node's exclusion
  // (CTRUN_EXCLUDE_NODE_FILE): <run log dir>/exclude_node.
  std::string ExcludeNodeFile() const;
  // Acts on `sig` as on a handled signal received (see the diagram above).
  // Start routes the real ones here; tests call it directly.
  void HandleSignal(int sig);

  int exit_code() const { return exit_code_; }
  State state() const { return state_; }

 private:
  // A stop of the worker group under way: why, and what comes after it.
  struct Stop {
    enum class Then {
      kRestart,        // re-rendezvous and start a new group (budget permitting)
      kSucceed,        // every worker exited 0: finish with kExitSuccess
      kExitForSignal,  // finish with kExitSignalBase + signal
      kLeaveUnhealthy, // leave the job as unhealthy: finish with kExitNodeUnhealthy
    };
    Then then = Then::kRestart;
    std::string cause;          // kRestart: the "restart" event's cause; kLeaveUnhealthy: the report
    bool charged = true;        // kRestart: counts against --max-restarts
    int signal = 0;             // kExitForSignal, kLeaveUnhealthy: the last signal received (0: none)
    bool group_closed = false;  // the WorkerGroup's Close has completed
    AttemptEnd attempt;         // the stopped group's run, for RestartPolicy
    std::vector<StuckProcess> stuck;  // the close gave up on these (--kill-timeout)

    static Stop ToRestart(std::string cause, bool charged) {
      Stop s;
      s.cause = std::move(cause);
      s.charged = charged;
      s.attempt.membership_changed = s.cause == "membership_changed";
      return s;
    }
    static Stop ToSucceed() {
      Stop s;
      s.then = Then::kSucceed;
      return s;
    }
    static Stop ToLeaveUnhealthy(std::string report) {
      Stop s;
      s.then = Then::kLeaveUnhealthy;
      s.cause = std::move(report);
      return s;
    }
    static Stop ToExitForSignal(int sig) {
      Stop s;
      s.then = Then::kExitForSignal;
      s.signal = sig;
      return s;
    }
  };

  void BeginRendezvous();
  void OnRound(const Result<Round>& round);
  void StartWorkers(const Round& round);
  RoundEnv MakeRoundEnv(const Round& round) const;
  WorkerSpec MakeSpec(const WorkerRanks& ranks, const RoundEnv& round_env) const;
  void EmitWorkersStarted();
  void StartHeartbeat();
  // Tees each pipe of `pipes` (per worker: stdout, stderr; -1 none), and
  // opens this attempt's --duplicate-*-filters files.
  void StartTees(const std::vector<std::pair<int, int>>& pipes);
  void StartTee(int pipe_fd, bool tee, bool redirect, bool on_console, const std::string& path,
                int console_fd, const std::string& prefix, FilteredLog* filtered);
  // The filtered log at `path`, or null when `filters` is empty or the file
  // cannot be made (a warning; the job goes on).
  std::unique_ptr<FilteredLog> OpenFilteredLog(const std::vector<std::string>& filters,
                                               const std::string& path) const;
  bool OnConsole(int local_rank) const;
  const WorkerBinding* BindingOf(int local_rank) const;  // null: not bound
  void OnWorkerExit(const WorkerExit& exit);
  void EmitWorkerExited(const WorkerExit& exit);
  void RecordFailure(const WorkerExit& exit);
  void OnMembershipChange(bool charged, const std::string& why);
  void OnHeartbeatMiss(const HeartbeatMiss& miss);
  // agent_steps.cc: straggler detection. The step report for this keep-alive
  // (nullopt unless workers run with a heartbeat), and a flag or recovery of
  // one of this node's ranks from the rendezvous (a `straggler` event).
  std::optional<rdzv::StepReport> StepReportNow();
  void OnStraggler(const rdzv::StragglerChange& change);
  // This attempt's heartbeat file of `local_rank` (in its log directory).
  std::string HeartbeatFile(int local_rank) const;
  void ArmSignals();
  // The one way to stop the group: sends `sig` (SIGKILL after the grace),
  // makes `stop` the stop under way, and ends it once the group is closed
  // and its tees have drained. Called again during a stop (a second
  // signal), it escalates that stop to SIGKILL and replaces it.
  void StopGroup(int sig, Stop stop);
  void OnGroupClosed(const std::vector<StuckProcess>& stuck);
  // Ends the stop under way if its group is closed and every tee drained;
  // returns whether it did.
  bool EndStopIfDrained();
  bool SignalReceived() const;
  void Restart(const Stop& stop);
  // Waits `delay` in kBackoff, then begins the next rendezvous.
  void BackOff(Duration delay);
  void Finish(State final_state, int code, ShutdownReason reason);
  // Prints the failure report and finishes with `code`, or (nullopt) with 1
  // or the root cause's own code (--exit-code-from-root-cause).
  void ReportFailure(std::optional<int> code = std::nullopt);
  void StopAtStartup(const Stop& stop);
  void ReportStuck(const std::vector<StuckProcess>& stuck);
  // Node health (launcher/health/).
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

  State state_ = State::kInit;
  std::optional<Stop> stop_;  // set exactly while state_ is kStopping
  int exit_code_ = kExitFailure;
  int restart_count_ = 0;
  int remaining_restarts_;
  Round round_;
  TimePoint attempt_started_{};  // when the current group was started
  std::vector<WorkerRanks> ranks_;
  int running_ = 0;
  std::vector<WorkerFailure> failures_;
  // Declared before tees_, which borrow them: destroyed after.
  std::unique_ptr<FilteredLog> filtered_stdout_;
  std::unique_ptr<FilteredLog> filtered_stderr_;
  std::vector<std::unique_ptr<StreamTee>> tees_;
  int open_tees_ = 0;
  std::unique_ptr<HeartbeatWatcher> heartbeat_;  // null when --heartbeat-timeout is 0
  std::unique_ptr<StepWatcher> steps_;           // exactly while heartbeat_ is set
  std::vector<WorkerBinding> bindings_;          // --numa-binding; empty: none
  HealthChecker* health_ = nullptr;              // --health-check; null: none
  boost::asio::steady_timer health_timer_;       // --health-check-interval, armed while kRunning
  std::unique_ptr<ExclusionWatch> exclusion_;    // live while the group runs or stops
};

}  // namespace ctrun::launcher
