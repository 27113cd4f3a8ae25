// Agent: the elastic agent of one node — the Asio shell around its
// AgentMachine (agent_machine.h: the states, the diagram, every decision).
// Events in (a round, a worker's exit from WorkerGroup's callback, a
// membership push, a signal, a heartbeat miss, a timer, the group's close,
// the output's drain), the machine's actions out (start, close, rendezvous,
// report, log, emit, finish), as RendezvousServer does with rdzv::Machine.
// A restart always replaces the whole local group.
//
// Files: agent.cc (events in, actions out), agent_attempt.cc (one started
// group's I/O: its start, failures, report and end). Each started group is
// one Attempt (attempt.h); its specs and tee plan come from worker_specs.h,
// its failure report from failure_report.h, its step reports from a
// StepReporter (stragglers.h), its heartbeat and step watches from a
// LivenessWatchers (launcher/liveness/watch.h; the real ones unless
// SetLivenessWatchers says otherwise). With an EventLog, the machine's
// events are written there as JSON lines.
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
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/agent/agent_machine.h"
#include "launcher/agent/attempt.h"
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
  using State = AgentState;

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
  // launch from one rank's failure (AgentMachine's kLaunchWindow);
  // kBadLaunchWindowS by default, 0 for none. Call before Start.
  void SetLaunchWindow(Duration window) { launch_window_ = window; }
  // The file a worker writes to ask for this node's exclusion
  // (CTRUN_EXCLUDE_NODE_FILE): <run log dir>/exclude_node.
  std::string ExcludeNodeFile() const;
  // Acts on `sig` as on a handled signal received (agent_machine.h).
  // Start routes the real ones here; tests call it directly.
  void HandleSignal(int sig);

  int exit_code() const { return machine_->exit_code(); }
  State state() const { return machine_->state(); }

 private:
  // agent.cc: events in, actions out.
  // Steps the machine with `event` and runs its actions; the events they
  // answer with (and any that arrive meanwhile) are queued and stepped next.
  void Feed(AgentEvent event);
  static AgentNow Now();  // the clocks, read for each event
  void Run(const AgentAction& action);
  void ArmSignals();
  void NextRound();
  void RunHealthCheck(bool periodic);
  void ArmTimer(AgentTimer timer, Duration delay);
  void Finish(ShutdownReason reason, bool succeeded);
  std::vector<std::string> PreemptMarkers() const;

  // agent_attempt.cc: one started group's I/O.
  void StartWorkers();
  void WatchWorkers();
  void OnWorkerExit(const WorkerExit& exit);
  void OnHeartbeatMiss(const HeartbeatMiss& miss);
  void RecordFailure(const AgentAction& action);
  void ReportExecFailure(const std::string& error);
  void CloseGroup(const AgentAction& action);
  // Ends the attempt once its group is closed and every tee drained.
  void EndWhenDrained();
  void EndAttempt();
  // The ended attempt's failure report on stderr (and TORCHELASTIC_ERROR_FILE);
  // returns its exit code (`forced`, or 1 or the root cause's own).
  int PrintFailureReport(std::optional<int> forced);

  boost::asio::io_context& io_;
  const LaunchConfig& config_;
  Environment env_;
  RendezvousHandler& rdzv_;
  WorkerGroup& workers_;
  RunLogDir log_dir_;
  rdzv::StoreServer* store_;  // null: this agent hosts no store
  EventLog* events_;    // null: no --events-file
  boost::asio::signal_set signals_;
  std::vector<WorkerBinding> bindings_;          // --numa-binding; empty: none
  HealthChecker* health_ = nullptr;              // --health-check; null: none
  std::function<void(const Round&)> round_observer_;  // SetRoundObserver; empty: none
  LivenessWatchers* liveness_;                   // never null
  Duration launch_window_ = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(rdzv::kBadLaunchWindowS));

  std::optional<AgentMachine> machine_;  // set from the constructor on; made again by Start
  std::deque<AgentEvent> queue_;  // Feed's events not yet stepped
  bool feeding_ = false;
  std::vector<boost::asio::steady_timer> timers_;  // by AgentTimer
  Round round_;  // the last round ready
  // --share-logs with a rendezvous that keeps logs: made in Start, stopped
  // (flushed for at most kShareLogsFlush) in Finish. Declared before the
  // attempt and the ended tees, which hand it lines: destroyed after them.
  std::unique_ptr<LogShipper> shipper_;
  // The attempt under way: made by StartWorkers, destroyed when its stop has
  // drained (EndAttempt), or by Finish when its workers could not start.
  std::unique_ptr<Attempt> attempt_;
  // The last ended attempt's tees (attempt.h): dropped at the next start.
  std::unique_ptr<AttemptTees> ended_tees_;
  StepReporter steps_;  // watching exactly while attempt_ has a heartbeat watch
  // The last ended attempt: whether a worker touched its heartbeat before
  // its stop, the processes its close gave up on, its failures, and its
  // report to the rendezvous (this node's verdict).
  bool heartbeat_touched_ = false;
  std::vector<StuckProcess> stuck_;
  std::vector<WorkerFailure> ended_failures_;
  std::optional<RendezvousHandler::FailureReport> last_report_;
};

}  // namespace ctrun::launcher
