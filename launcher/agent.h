// Agent: the elastic agent of one node — a small state machine on one Asio
// loop that runs rounds of the local worker group.
//
//   kRendezvous -> kRunning -> kStopping -> kSucceeded   (every worker exited 0)
//   kRunning -> kStopping -> kRendezvous                 (a worker failed with restarts
//                                                         left, or membership changed)
//   kRunning -> kStopping -> kFailed                     (no restarts left, or a signal)
//
// With --heartbeat-timeout, a worker that stops touching its heartbeat file
// counts as a failed worker: the group is stopped and restarted while the
// budget lasts (launcher/process/heartbeat.h).
//
// Events: a round is ready, a worker exited (SIGCHLD via the Reaper, never
// polling), membership changed (rendezvous push), a handled signal arrived,
// the shutdown grace ran out. A restart always replaces the whole local group.
//
// With an EventLog, every event above is also written there as a JSON line.
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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/config.h"
#include "launcher/logs/event_log.h"
#include "launcher/process/heartbeat.h"
#include "launcher/logs/log_dir.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "launcher/logs/report.h"
#include "launcher/store/store_server.h"
#include "launcher/logs/stream_tee.h"
#include "launcher/process/worker_env.h"
#include "launcher/process/workers.h"

namespace ctrun::launcher {

// ctrun's exit codes (docs/exit-codes.md).
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;   // workers failed with no restarts left, or rendezvous failed
inline constexpr int kExitUsage = 2;     // bad flag, env value or script; nothing was started
inline constexpr int kExitSignalBase = 128;  // 128 + N: stopped by signal N, workers stopped first

class Agent {
 public:
  enum class State { kInit, kRendezvous, kRunning, kStopping, kSucceeded, kFailed };

  Agent(boost::asio::io_context& io, const LaunchConfig& config, Environment env,
        RendezvousHandler& rdzv, Reaper& reaper, OrphanGuard* guard, RunLogDir log_dir,
        StoreServer* store = nullptr, EventLog* events = nullptr);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Installs the signal handlers and starts the first rendezvous. When the
  // agent is done it stops `io`; then exit_code() is final.
  void Start();
  int exit_code() const { return exit_code_; }
  State state() const { return state_; }

 private:
  void BeginRendezvous();
  void OnRound(const Result<Round>& round);
  void StartWorkers(const Round& round);
  void OnWorkerExit(const WorkerExit& exit);
  void OnMembershipChange(bool charged, const std::string& why);
  void OnHeartbeatMiss(const HeartbeatMiss& miss);
  // This attempt's heartbeat file of `local_rank` (in its log directory).
  std::string HeartbeatFile(int local_rank) const;
  void OnSignal(int sig);
  void ArmSignals();
  // Stops the group (sig, then SIGKILL after the grace) and waits for the
  // tees to drain; then runs `then`.
  void StopWorkers(int sig, std::function<void()> then);
  void AfterFailureStop();
  void Finish(State final_state, int code, ShutdownReason reason);
  void ReportFailure();

  boost::asio::io_context& io_;
  const LaunchConfig& config_;
  Environment env_;
  RendezvousHandler& rdzv_;
  RunLogDir log_dir_;
  StoreServer* store_;  // null: this agent hosts no store
  EventLog* events_;    // null: no --events-file
  std::string restart_cause_;  // why the stop under way was started
  WorkerSet workers_;
  boost::asio::signal_set signals_;

  State state_ = State::kInit;
  int exit_code_ = kExitFailure;
  int restart_count_ = 0;
  int remaining_restarts_;
  int signal_received_ = 0;
  bool charged_restart_ = true;
  bool stopping_to_restart_ = false;  // the stop in progress ends in AfterFailureStop
  Round round_;
  std::vector<WorkerRanks> ranks_;
  int running_ = 0;
  std::vector<WorkerFailure> failures_;
  std::vector<std::unique_ptr<StreamTee>> tees_;
  int open_tees_ = 0;
  std::function<void()> after_drain_;
  bool group_closed_ = false;
  std::unique_ptr<HeartbeatWatcher> heartbeat_;  // null when --heartbeat-timeout is 0
};

}  // namespace ctrun::launcher
