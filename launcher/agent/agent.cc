// The agent's rounds, workers and restarts (launcher/agent/agent.h); the
// stop and signals are in agent_stop.cc, node health in node_health.cc.
#include "launcher/agent/agent.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>

#include "launcher/report/failure_report.h"
#include "launcher/cli/command.h"
#include "launcher/forensics/oom_kills.h"
#include "launcher/report/error_file.h"
#include "launcher/net/local_address.h"

namespace ctrun::launcher {

namespace {


using Json = nlohmann::ordered_json;

double ToSecondsValue(Duration d) { return std::chrono::duration<double>(d).count(); }

RestartPolicyConfig PolicyConfig(const LaunchConfig& c) {
  RestartPolicyConfig p;
  p.backoff = ToDuration(c.restart_backoff);
  p.min_healthy_uptime = ToDuration(c.min_healthy_uptime);
  p.fail_fast_on_startup = c.fail_fast_on_startup;
  p.heartbeat_on = c.heartbeat_timeout > Seconds(0);
  p.restart_unfixable = c.restart_on_any_failure;
  return p;
}

Json RoundFields(const Round& round) {
  return Json{{"round", round.round},
              {"group_rank", round.group_rank},
              {"nodes", round.local_world_sizes.size()},
              {"local_world_sizes", round.local_world_sizes},
              {"master_addr", round.master_addr},
              {"master_port", round.master_port},
              {"agent_store", round.use_agent_store}};
}

}  // namespace

const char* StateName(Agent::State s) {
  switch (s) {
    case Agent::State::kInit: return "init";
    case Agent::State::kRendezvous: return "rendezvous";
    case Agent::State::kRunning: return "running";
    case Agent::State::kStopping: return "stopping";
    case Agent::State::kBackoff: return "backoff";
    case Agent::State::kSucceeded: return "succeeded";
    case Agent::State::kFailed: return "failed";
  }
  return "?";
}

Agent::Agent(boost::asio::io_context& io, const LaunchConfig& config, Environment env,
             RendezvousHandler& rdzv, WorkerGroup& workers, RunLogDir log_dir,
             rdzv::StoreServer* store, EventLog* events)
    : io_(io),
      config_(config),
      env_(std::move(env)),
      rdzv_(rdzv),
      workers_(workers),
      log_dir_(std::move(log_dir)),
      store_(store),
      events_(events),
      signals_(io),
      backoff_timer_(io),
      policy_(PolicyConfig(config)),
      liveness_(&RealLivenessWatchers()),
      health_timer_(io),
      remaining_restarts_(config.max_restarts),
      steps_(events, rdzv::StragglerParams{config.straggler_factor, config.straggler_intervals}),
      preempt_timer_(io),
      preempt_waiting_timer_(io),
      launch_window_timer_(io) {
  for (int sig : config_.signals_to_handle) signals_.add(sig);
}

void Agent::Start() {
  ArmSignals();
  if (config_.share_logs) {
    if (rdzv::LogSinkFactory sinks = rdzv_.LogSinks()) {
      shipper_ = std::make_unique<LogShipper>(std::move(sinks));
    } else {
      spdlog::warn("--share-logs: this rendezvous has no server that keeps logs (only the c10d backend with "
                   "--rdzv-endpoint, or ctrund, has one): the workers' lines stay on this node");
    }
  }
  rdzv_.OnChange(
      [this](bool charged, const std::string& why) { OnMembershipChange(charged, why); });
  rdzv_.OnPreemptNotice([this](const PreemptNotice& notice) { OnPeerPreempt(notice); });
  rdzv_.OnRunFailed([this](const std::optional<rdzv::VerdictSummary>& verdict) { OnPeerFailed(verdict); });
  rdzv_.TrackSteps(
      [this]() -> std::optional<rdzv::StepReport> {
        if (state_ != State::kRunning) return std::nullopt;
        return steps_.Report();
      },
      [this](const rdzv::StragglerChange& change) { steps_.OnChange(change, restart_count_); });
  BeginRendezvous();
}

void Agent::ArmSignals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    HandleSignal(sig);
    ArmSignals();
  });
}

std::string Agent::ExcludeNodeFile() const { return launcher::ExcludeNodeFile(log_dir_); }

AttemptInputs Agent::Inputs() const {
  return AttemptInputs{config_, env_, log_dir_, restart_count_, bindings_};
}

void Agent::BeginRendezvous() {
  state_ = State::kRendezvous;
  // The attempt's directories are made while the round forms: once it is
  // complete, every node starts its workers at once.
  Status s = log_dir_.PrepareAttempt(restart_count_, config_.nproc_per_node);
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    Finish(State::kFailed, kExitFailure, ShutdownReason::kFailed);
    return;
  }
  // The last group is gone: its keys and connections must not leak into the
  // next one (after a scale-up the attempt prefix is even the same).
  if (store_) store_->Clear();
  if (events_) events_->Emit("rendezvous_started", Json{{"restart_count", restart_count_}});
  if (health_) {
    // Before every join: a broken node must not take a place in the round.
    health_->Run([this](const HealthResult& result) { OnPreJoinCheck(result); });
    return;
  }
  rdzv_.NextRound([this](const Result<Round>& round) { OnRound(round); });
}

void Agent::OnRound(const Result<Round>& round) {
  if (state_ != State::kRendezvous) return;  // a signal ended the wait
  if (!round.ok()) {
    const bool budget = round.status().code() == Status::Code::kResourceExhausted;
    if (budget) {
      spdlog::error("the job ends: {} (exit code {})", round.status().message(), kExitUnhealthyBudget);
    } else {
      spdlog::error("rendezvous failed: {}", round.status().message());
    }
    if (events_) {
      events_->Emit(budget ? "unhealthy_budget_exceeded" : "rendezvous_failed",
                    Json{{"error", round.status().message()}});
    }
    if (peer_failed_) {  // the run was closed by a node that failed for good: its verdict
      FinishFailed(kExitFailure, ShutdownReason::kFailed);
      return;
    }
    Finish(State::kFailed, budget ? kExitUnhealthyBudget : kExitFailure, ShutdownReason::kFailed);
    return;
  }
  if (events_) events_->Emit("round_complete", RoundFields(*round));
  if (round_observer_) round_observer_(*round);
  StartWorkers(*round);
}

void Agent::StartWorkers(const Round& round) {
  ended_tees_.reset();
  last_report_.reset();
  attempt_ = std::make_unique<Attempt>();
  attempt_->round = round;
  attempt_->ranks = AssignRanks(round.group_rank, round.local_world_sizes);
  const std::vector<WorkerSpec> specs = MakeWorkerSpecs(Inputs(), round, attempt_->ranks);
  attempt_->running = static_cast<int>(specs.size());
  // Armed before the workers start, so no request can be missed; a stale
  // one is removed.
  attempt_->exclusion = std::make_unique<ExclusionWatch>(
      io_, ExcludeNodeFile(), [this](const std::string& reason) { OnExclusionRequest(reason); });
  std::vector<std::pair<int, int>> pipes;
  Status s = workers_.Start(
      specs, [this](const WorkerExit& e) { OnWorkerExit(e); }, &pipes);
  if (!s.ok()) {
    spdlog::error("cannot start workers: {}", s.message());
    FailToStart(round, s.message());
    return;
  }
  state_ = State::kRunning;
  attempt_->started = Clock::now();
  // The OOM killer's count of the workers' memory cgroup, before they run
  // (a failure's evidence: oom_kills.h).
  if (const std::vector<pid_t> pids = workers_.Pids(); !pids.empty()) {
    attempt_->oom_file = OomKillsFileOf(pids.front());
    if (attempt_->oom_file) attempt_->oom_kills_at_start = ReadOomKillsFile(*attempt_->oom_file);
  }
  EmitWorkersStarted();
  StartHeartbeat();
  TeePlan plan = MakeTeePlan(Inputs(), attempt_->ranks);
  plan.shipper = shipper_.get();
  attempt_->tees->Start(io_, plan, pipes, [this] { EndStopIfDrained(); });
  ArmHealthTimer();
}

void Agent::EmitWorkersStarted() {
  if (!events_) return;
  const std::vector<pid_t> pids = workers_.Pids();
  const std::vector<WorkerRanks>& ranks = attempt_->ranks;
  for (size_t i = 0; i < ranks.size() && i < pids.size(); ++i) {
    Json f{{"local_rank", ranks[i].local_rank}, {"rank", ranks[i].rank}, {"pid", pids[i]},
           {"restart_count", restart_count_}};
    if (const WorkerBinding* b = BindingOf(bindings_, ranks[i].local_rank)) {
      f["cpus"] = b->cpus;
      f["memory_nodes"] = b->memory_nodes;
      f["binding"] = b->summary;
    }
    events_->Emit("worker_started", f);
  }
}

void Agent::StartHeartbeat() {
  if (config_.heartbeat_timeout <= Seconds(0)) return;
  std::vector<std::string> files;
  for (const WorkerRanks& r : attempt_->ranks) files.push_back(HeartbeatFile(log_dir_, restart_count_, r.local_rank));
  steps_.Watch(liveness_->WatchSteps(io_, files), attempt_->round.round, attempt_->ranks);
  const HeartbeatTimeouts timeouts{
      ToDuration(config_.heartbeat_initial_timeout.value_or(config_.heartbeat_timeout)),
      ToDuration(config_.heartbeat_timeout)};
  attempt_->heartbeat = liveness_->WatchHeartbeats(io_, timeouts, std::move(files),
                                                   [this](const HeartbeatMiss& miss) { OnHeartbeatMiss(miss); });
}

void Agent::OnWorkerExit(const WorkerExit& e) {
  if (!attempt_) return;  // its attempt has ended: nothing of it is left to update
  Attempt& attempt = *attempt_;
  --attempt.running;
  // A worker that wrote its request and exited: the request wins over the
  // failure (the inotify event may come after the exit).
  if (attempt.exclusion && state_ == State::kRunning) attempt.exclusion->Check();
  if (attempt.heartbeat) attempt.heartbeat->Forget(e.local_rank);
  EmitWorkerExited(e);
  const bool failed = e.exit_code != 0;
  if (failed && !SignalReceived()) RecordFailure(e);
  if (state_ != State::kRunning) return;
  if (preempt_) {
    PreemptWorkerExited(e);
    return;
  }
  if (failed) {
    const bool wait = WaitOutLaunchWindow();
    spdlog::warn("worker local_rank {} (pid {}) exited with {}; stopping the worker group{}", e.local_rank, e.pid,
                 e.exit_code < 0 ? SignalName(-e.exit_code) : std::to_string(e.exit_code),
                 wait ? " at the end of its first second (to tell a bad launch from one rank's failure)" : "");
    if (!wait) StopGroup(SIGTERM, StopForFailure());
  } else if (attempt.running == 0) {
    StopGroup(SIGTERM, attempt.failed_early ? StopForFailure()
                                            : Stop::ToSucceed());
  }
}

// The stop a worker's failure begins: a restart, or, once another node
// failed for good (--kill-on-bad-exit), the end with its verdict.
Stop Agent::StopForFailure() const {
  if (peer_failed_ && config_.kill_on_bad_exit) return Stop::ToPeerFailed();
  return Stop::ToRestart(StopCause::kWorkerFailed, /*charged=*/true);
}

// A worker failed within the launch window (kBadLaunchWindowS): the others
// run to the window's end, or to their own end, before the group is
// stopped, so that a bad launch (every rank failing the same way:
// IsBadLaunch) is told from one rank's failure. Returns whether the stop
// waits.
bool Agent::WaitOutLaunchWindow() {
  const Duration since = Clock::now() - attempt_->started;
  if (attempt_->running == 0 || since >= launch_window_) return false;
  if (!attempt_->failed_early) {
    attempt_->failed_early = true;
    launch_window_timer_.expires_after(launch_window_ - since);
    launch_window_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || state_ != State::kRunning || !attempt_ || !attempt_->failed_early) return;
      StopGroup(SIGTERM, StopForFailure());
    });
  }
  return true;
}

void Agent::EmitWorkerExited(const WorkerExit& e) {
  if (!events_) return;
  Json f{{"local_rank", e.local_rank}, {"rank", attempt_->ranks[e.local_rank].rank}, {"pid", e.pid}};
  if (e.exit_code < 0) f["signal"] = SignalName(-e.exit_code);
  else f["exit_code"] = e.exit_code;
  f["during"] = StateName(state_);
  events_->Emit("worker_exited", f);
}

void Agent::RecordFailure(const WorkerExit& e) {
  const int lr = e.local_rank;
  attempt_->failures.push_back(ReadWorkerFailure(e, attempt_->ranks[lr].rank, BindingOf(bindings_, lr),
                                                 log_dir_.StacksFile(restart_count_, lr),
                                                 log_dir_.ErrorFile(restart_count_, lr)));
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Exited while the agent stopped the group: stopped by it, unless it hung
  // (its heartbeat missed, or its stacks saved: a cause, not a consequence).
  const bool hung = attempt_->hung_local_rank == lr || !attempt_->failures.back().stacks.empty();
  const bool stopped = state_ == State::kStopping && !hung;
  FailureContext context{stopped, now_s};
  context.oom_kills_before = attempt_->oom_kills_at_start;
  if (attempt_->oom_file) context.oom_kills_after = ReadOomKillsFile(*attempt_->oom_file);
  context.runtime_s = ToSecondsValue(Clock::now() - attempt_->started);
  context.max_rss_kib = e.max_rss_kib;
  context.hung = hung;
  context.steps = steps_.StepsOf(lr);
  attempt_->failure_contexts.push_back(std::move(context));
}

void Agent::OnMembershipChange(bool charged, const std::string& why) {
  if (events_) {
    events_->Emit("membership_changed",
                  Json{{"why", why}, {"charged", charged}, {"state", StateName(state_)}});
  }
  if (preempt_) {
    // The nodes that saved leave the run: no restart now. A peer lost
    // mid-save leaves this node's workers to the deadline.
    spdlog::info("{} during the preemption save; the workers go on saving", why);
    return;
  }
  if (state_ == State::kStopping && stop_->then == Stop::Then::kRestart && stop_->charged &&
      !charged) {
    // A peer's death usually breaks the collective, and so fails a worker,
    // just before its push arrives: the restart under way is the
    // membership's, and is not charged either.
    spdlog::warn("{}; restarting the worker group (not charged to --max-restarts)", why);
    stop_->charged = false;
    stop_->cause = StopCause::kMembershipChanged;
    stop_->attempt.membership_changed = true;
    return;
  }
  if (state_ != State::kRunning) return;
  spdlog::warn("{}; restarting the worker group{}", why,
               charged ? "" : " (not charged to --max-restarts)");
  StopGroup(SIGTERM, Stop::ToRestart(StopCause::kMembershipChanged, charged));
}

// A hung worker is a failed worker: SIGTERM lets the healthy ones exit
// cleanly, the shutdown grace then SIGKILLs one that is stuck for good.
void Agent::OnHeartbeatMiss(const HeartbeatMiss& miss) {
  if (state_ != State::kRunning) return;
  const std::vector<pid_t> pids = workers_.Pids();
  const pid_t pid = miss.local_rank < static_cast<int>(pids.size()) ? pids[miss.local_rank] : 0;
  spdlog::warn("worker local_rank {} (pid {}) missed its heartbeat for {:.1f} s{}; killing the worker group",
               miss.local_rank, pid, std::chrono::duration<double>(miss.silent_for).count(),
               miss.ever_touched ? "" : " (never touched CTRUN_HEARTBEAT_FILE since its start)");
  if (events_) {
    events_->Emit("heartbeat_expired",
                  Json{{"local_rank", miss.local_rank}, {"pid", pid},
                       {"silent_for_s", std::chrono::duration<double>(miss.silent_for).count()}});
  }
  attempt_->hung_local_rank = miss.local_rank;
  workers_.SaveStacks(miss.local_rank, "its heartbeat expired");
  StopGroup(SIGTERM, Stop::ToRestart(StopCause::kHeartbeatExpired, /*charged=*/true));
}

void Agent::Restart(const Stop& stop, const std::vector<WorkerFailure>& failures) {
  if (preempt_) {  // no restart during a notice: the job is being stopped
    MissPreempt(fmt::format("the workers were stopped for a restart ({})", Name(stop.cause)));
    FinishPreempted(failures);
    return;
  }
  const RestartPolicy::Decision next = policy_.OnAttemptEnd(stop.attempt);
  if (!stop.charged) {
    if (events_) {
      events_->Emit("restart", Json{{"cause", Name(stop.cause)}, {"charged", false},
                                    {"restart_count", restart_count_},
                                    {"remaining_restarts", remaining_restarts_}});
    }
    BeginRendezvous();
    return;
  }
  if (next.stop_at_startup) {
    StopAtStartup(stop, failures);
    return;
  }
  if (!next.unfixable.empty() && remaining_restarts_ > 0) {
    StopUnfixable(stop, next.unfixable, failures);
    return;
  }
  if (remaining_restarts_ <= 0) {
    ReportFailure(failures);
    return;
  }
  --remaining_restarts_;
  ++restart_count_;
  if (next.delay > Duration::zero()) {
    spdlog::warn("restarting the worker group in {:.1f} s (restart {} of {}; --restart-backoff)",
                 ToSecondsValue(next.delay), restart_count_, config_.max_restarts);
  } else {
    spdlog::warn("restarting the worker group (restart {} of {})", restart_count_, config_.max_restarts);
  }
  if (events_) {
    Json f{{"cause", Name(stop.cause)}, {"charged", true}, {"restart_count", restart_count_},
           {"remaining_restarts", remaining_restarts_}};
    if (config_.restart_backoff > Seconds(0)) f["delay_s"] = ToSecondsValue(next.delay);
    events_->Emit("restart", f);
  }
  if (next.delay > Duration::zero()) {
    BackOff(next.delay);
  } else {
    BeginRendezvous();
  }
}

void Agent::BackOff(Duration delay) {
  state_ = State::kBackoff;
  backoff_timer_.expires_after(delay);
  backoff_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || state_ != State::kBackoff) return;  // a signal ended the wait
    BeginRendezvous();
  });
}

// The first attempt crashed before any progress: the script, its imports or
// its environment are broken, and every restart would fail the same way.
void Agent::StopAtStartup(const Stop& stop, const std::vector<WorkerFailure>& failures) {
  const bool heartbeat = config_.heartbeat_timeout > Seconds(0);
  spdlog::error(
      "the first attempt failed at start-up ({} after {:.1f} s, {}); not restarting it "
      "(--fail-fast-on-startup), exit code {} (do not requeue)",
      stop.cause == StopCause::kHeartbeatExpired ? "a worker missed its first heartbeat" : "a worker failed",
      ToSecondsValue(stop.attempt.uptime),
      heartbeat ? std::string("no worker touched CTRUN_HEARTBEAT_FILE")
                : fmt::format("under --min-healthy-uptime {:.0f} s", config_.min_healthy_uptime.count()),
      kExitDoNotRequeue);
  if (events_) {
    events_->Emit("startup_failed", Json{{"cause", Name(stop.cause)},
                                         {"uptime_s", ToSecondsValue(stop.attempt.uptime)},
                                         {"heartbeat_touched", stop.attempt.heartbeat_touched},
                                         {"remaining_restarts", remaining_restarts_}});
  }
  ReportFailure(failures, kExitDoNotRequeue);
}

// A failure no restart can fix (RestartPolicy: a bad launch, the same error
// twice in a row): restarting would only repeat it.
void Agent::StopUnfixable(const Stop& stop, const std::string& why, const std::vector<WorkerFailure>& failures) {
  spdlog::error("not restarting: {}; exit code {} (do not requeue; --restart-on-any-failure restarts anyway)", why,
                kExitDoNotRequeue);
  if (events_) {
    events_->Emit("restart_refused", Json{{"cause", Name(stop.cause)},
                                          {"why", why},
                                          {"bad_launch", stop.attempt.bad_launch},
                                          {"remaining_restarts", remaining_restarts_}});
  }
  ReportFailure(failures, kExitDoNotRequeue);
}

void Agent::ReportFailure(const std::vector<WorkerFailure>& failures, std::optional<int> forced_code) {
  FinishFailed(PrintFailureReport(failures, forced_code), ShutdownReason::kFailed);
}

int Agent::PrintFailureReport(const std::vector<WorkerFailure>& failures, std::optional<int> forced_code) {
  std::string name;
  std::string host;
  if (!failures.empty()) {
    const std::vector<std::string> argv = BuildWorkerArgv(config_, 0);
    name = EntrypointName(argv[0], std::vector<std::string>(argv.begin() + 1, argv.end()), config_.python_exec);
    host = HostName();
  }
  const FailureOutcome out =
      DecideFailure(failures, name, host, config_.exit_code_from_root_cause, forced_code);
  if (out.root) {
    WriteAll(STDERR_FILENO, out.report + "\n");
    auto outer = env_.find("TORCHELASTIC_ERROR_FILE");
    const WorkerFailure& rc = failures[*out.root];
    if (outer != env_.end() && !outer->second.empty()) {
      Status s = WriteAgentErrorFile(outer->second, RootCauseErrorData(rc), rc.exit_code);
      if (!s.ok()) spdlog::warn("{}", s.message());
    }
  }
  return out.exit_code;
}

void Agent::Finish(State final_state, int code, ShutdownReason reason) {
  state_ = final_state;
  exit_code_ = code;
  if (events_) {
    Json f{{"state", StateName(final_state)}, {"exit_code", code}, {"restart_count", restart_count_}};
    if (verdict_) {
      f["cause_class"] = std::string(rdzv::FailureClassName(verdict_->cls));
      f["cause_rank"] = verdict_->rank ? Json(*verdict_->rank) : Json(nullptr);
      f["cause_node"] = verdict_->node;
      f["cause_host"] = verdict_->host;
      f["evidence"] = verdict_->evidence;
      f["verdict"] = verdict_->line;
    }
    events_->Emit("finished", f);
  }
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  backoff_timer_.cancel();
  launch_window_timer_.cancel();
  StopHealthWatch();
  attempt_.reset();  // one whose workers could not start; any other has ended already
  // The last lines out before the rendezvous (maybe this agent's own server) goes.
  if (shipper_) shipper_->Stop(kShareLogsFlush);
  if (code == kExitSuccess) log_dir_.RemoveIfTemporary();
  rdzv_.Shutdown(reason, [this] { io_.stop(); });
}

}  // namespace ctrun::launcher
