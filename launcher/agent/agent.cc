#include "launcher/agent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/cli/command.h"
#include "launcher/logs/error_file.h"
#include "launcher/net/local_address.h"
#include "launcher/forensics/stack_text.h"
#include "launcher/process/worker_env.h"

namespace ctrun::launcher {

namespace {

Duration ToDuration(Seconds s) { return std::chrono::duration_cast<Duration>(s); }

using Json = nlohmann::ordered_json;

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

// Where one of a worker's streams goes: a pipe to read (tee, filters), a
// file only, the console (inherited), or nowhere when the rank is filtered
// off the console.
StdioTarget ChooseTarget(bool pipe, bool redirect, bool on_console, const std::string& path) {
  StdioTarget t;
  if (pipe) {
    t.mode = StdioTarget::Mode::kPipe;
  } else if (redirect) {
    t.mode = StdioTarget::Mode::kFile;
    t.path = path;
  } else if (!on_console) {
    t.mode = StdioTarget::Mode::kNull;
  }
  return t;
}

double ToSecondsValue(Duration d) { return std::chrono::duration<double>(d).count(); }

RestartPolicyConfig PolicyConfig(const LaunchConfig& c) {
  RestartPolicyConfig p;
  p.backoff = ToDuration(c.restart_backoff);
  p.min_healthy_uptime = ToDuration(c.min_healthy_uptime);
  p.fail_fast_on_startup = c.fail_fast_on_startup;
  p.heartbeat_on = c.heartbeat_timeout > Seconds(0);
  return p;
}

}  // namespace

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
      remaining_restarts_(config.max_restarts),
      health_timer_(io) {
  for (int sig : config_.signals_to_handle) signals_.add(sig);
}

void Agent::Start() {
  ArmSignals();
  rdzv_.OnChange(
      [this](bool charged, const std::string& why) { OnMembershipChange(charged, why); });
  rdzv_.TrackSteps([this] { return StepReportNow(); },
                   [this](const rdzv::StragglerChange& change) { OnStraggler(change); });
  BeginRendezvous();
}

void Agent::ArmSignals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    HandleSignal(sig);
    ArmSignals();
  });
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

void Agent::OnPreJoinCheck(const HealthResult& result) {
  if (state_ != State::kRendezvous) return;  // a signal ended the wait
  if (!result.healthy) {
    LeaveUnhealthy(ReportFailedCheck(result, "rendezvous", "; this node does not join: it leaves the job"));
    return;
  }
  rdzv_.NextRound([this](const Result<Round>& round) { OnRound(round); });
}

std::string Agent::ReportFailedCheck(const HealthResult& result, const char* during, const char* next) {
  const std::string report = FormatHealthReport(health_->command(), result);
  spdlog::error("health check '{}' {}{}", health_->command(), result.failure, next);
  if (events_) {
    events_->Emit("node_unhealthy", Json{{"source", "health_check"}, {"during", during},
                                         {"report", report}, {"last_lines", result.last_lines}});
  }
  return report;
}

void Agent::ArmHealthTimer() {
  if (!health_ || config_.health_check_interval <= Seconds(0)) return;
  health_timer_.expires_after(ToDuration(config_.health_check_interval));
  health_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || state_ != State::kRunning) return;
    health_->Run([this](const HealthResult& result) { OnPeriodicCheck(result); });
  });
}

void Agent::OnPeriodicCheck(const HealthResult& result) {
  if (state_ != State::kRunning) return;
  if (result.healthy) {
    ArmHealthTimer();
    return;
  }
  const std::string report =
      ReportFailedCheck(result, "running", "; stopping the workers: this node leaves the job");
  StopGroup(SIGTERM, Stop::ToLeaveUnhealthy(report));
}

std::string Agent::ExcludeNodeFile() const { return log_dir_.path() + "/exclude_node"; }

void Agent::OnExclusionRequest(const std::string& reason) {
  const std::string report =
      "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): " + reason;
  const bool running = state_ == State::kRunning;
  const bool restarting = state_ == State::kStopping && stop_->then == Stop::Then::kRestart;
  if (!running && !restarting) return;  // finishing anyway (success or a signal)
  spdlog::error("{}; stopping the workers: this node leaves the job", report);
  if (events_) {
    events_->Emit("node_unhealthy", Json{{"source", "exclusion_request"}, {"during", StateName(state_)},
                                         {"report", report}, {"last_lines", Json::array({reason})}});
  }
  if (running) {
    StopGroup(SIGTERM, Stop::ToLeaveUnhealthy(report));
  } else {
    // A worker failed just before (or because of) its request: the stop
    // under way is the node's exclusion, not a restart.
    stop_->then = Stop::Then::kLeaveUnhealthy;
    stop_->cause = report;
  }
}

void Agent::StopHealthWatch() {
  health_timer_.cancel();
  if (health_) health_->Cancel();
}

// The node leaves for good; the rendezvous counts it against
// --max-unhealthy-nodes and a spare (or the survivors) takes over.
void Agent::LeaveUnhealthy(const std::string& report) {
  std::string block = "[ctrun] node unhealthy: " + HostName() + "\n";
  for (size_t start = 0; start < report.size();) {
    size_t end = report.find('\n', start);
    if (end == std::string::npos) end = report.size();
    block += "  " + report.substr(start, end - start) + "\n";
    start = end + 1;
  }
  block += "  this node leaves the job (exit code " + std::to_string(kExitNodeUnhealthy) +
           "); the other nodes go on without it\n";
  WriteAll(STDERR_FILENO, block);
  rdzv_.SetUnhealthyReport(report);
  Finish(State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
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
    Finish(State::kFailed, budget ? kExitUnhealthyBudget : kExitFailure, ShutdownReason::kFailed);
    return;
  }
  if (events_) {
    events_->Emit("round_complete",
                  Json{{"round", round->round}, {"group_rank", round->group_rank},
                       {"nodes", round->local_world_sizes.size()},
                       {"local_world_sizes", round->local_world_sizes},
                       {"master_addr", round->master_addr}, {"master_port", round->master_port},
                       {"agent_store", round->use_agent_store}});
  }
  StartWorkers(*round);
}

void Agent::StartWorkers(const Round& round) {
  round_ = round;
  ranks_ = AssignRanks(round.group_rank, round.local_world_sizes);
  const RoundEnv round_env = MakeRoundEnv(round);
  std::vector<WorkerSpec> specs;
  for (const WorkerRanks& r : ranks_) specs.push_back(MakeSpec(r, round_env));

  failures_.clear();
  tees_.clear();
  open_tees_ = 0;
  running_ = static_cast<int>(specs.size());
  // Armed before the workers start, so no request can be missed; a stale
  // one is removed.
  exclusion_ = std::make_unique<ExclusionWatch>(
      io_, ExcludeNodeFile(), [this](const std::string& reason) { OnExclusionRequest(reason); });
  std::vector<std::pair<int, int>> pipes;
  Status s = workers_.Start(
      specs, [this](const WorkerExit& e) { OnWorkerExit(e); }, &pipes);
  if (!s.ok()) {
    spdlog::error("cannot start workers: {}", s.message());
    Finish(State::kFailed, kExitFailure, ShutdownReason::kFailed);
    return;
  }
  state_ = State::kRunning;
  attempt_started_ = Clock::now();
  EmitWorkersStarted();
  StartHeartbeat();
  StartTees(pipes);
  ArmHealthTimer();
}

RoundEnv Agent::MakeRoundEnv(const Round& round) const {
  RoundEnv round_env;
  round_env.master_addr = round.master_addr;
  round_env.master_port = round.master_port;
  round_env.restart_count = restart_count_;
  round_env.max_restarts = config_.max_restarts;
  round_env.run_id = round.run_id;
  round_env.use_agent_store = round.use_agent_store;
  round_env.role = config_.role;
  round_env.virtual_local_rank = config_.virtual_local_rank;
  round_env.exclude_node_file = ExcludeNodeFile();
  for (int sig : config_.signals_to_handle) round_env.signals_to_handle_names.push_back(SignalName(sig));
  return round_env;
}

WorkerSpec Agent::MakeSpec(const WorkerRanks& r, const RoundEnv& round_env) const {
  const int lr = r.local_rank;
  WorkerSpec spec;
  spec.local_rank = lr;
  spec.argv = BuildWorkerArgv(config_, lr);
  spec.env = ToEnvStrings(
      env_, WorkerEnvOverrides(env_, r, round_env, log_dir_.ErrorFile(restart_count_, lr),
                               config_.heartbeat_timeout > Seconds(0) ? HeartbeatFile(lr) : std::string()));
  // A stream with --duplicate-*-filters is read from a pipe, tee'd or not.
  spec.out = ChooseTarget(config_.tee.Stdout(lr) || !config_.duplicate_stdout_filters.empty(),
                          config_.redirects.Stdout(lr), OnConsole(lr), log_dir_.StdoutFile(restart_count_, lr));
  spec.err = ChooseTarget(config_.tee.Stderr(lr) || !config_.duplicate_stderr_filters.empty(),
                          config_.redirects.Stderr(lr), OnConsole(lr), log_dir_.StderrFile(restart_count_, lr));
  if (lr < static_cast<int>(bindings_.size())) spec.binding = bindings_[lr];
  if (config_.hang_stacks_timeout > Seconds(0)) {
    spec.stacks_file = log_dir_.StacksFile(restart_count_, lr);
    spec.stacks_timeout = ToDuration(config_.hang_stacks_timeout);
  }
  return spec;
}

const WorkerBinding* Agent::BindingOf(int local_rank) const {
  return local_rank >= 0 && local_rank < static_cast<int>(bindings_.size()) ? &bindings_[local_rank]
                                                                          : nullptr;
}

bool Agent::OnConsole(int local_rank) const {
  return !config_.local_ranks_filter || config_.local_ranks_filter->count(local_rank) > 0;
}

void Agent::EmitWorkersStarted() {
  if (!events_) return;
  const std::vector<pid_t> pids = workers_.Pids();
  for (size_t i = 0; i < ranks_.size() && i < pids.size(); ++i) {
    Json f{{"local_rank", ranks_[i].local_rank}, {"rank", ranks_[i].rank}, {"pid", pids[i]},
           {"restart_count", restart_count_}};
    if (const WorkerBinding* b = BindingOf(ranks_[i].local_rank)) {
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
  for (const WorkerRanks& r : ranks_) files.push_back(HeartbeatFile(r.local_rank));
  steps_ = std::make_unique<StepWatcher>(io_, files);
  heartbeat_ = std::make_unique<HeartbeatWatcher>(
      io_,
      HeartbeatTimeouts{
          ToDuration(config_.heartbeat_initial_timeout.value_or(config_.heartbeat_timeout)),
          ToDuration(config_.heartbeat_timeout)},
      std::move(files), [this](const HeartbeatMiss& miss) { OnHeartbeatMiss(miss); });
}

std::unique_ptr<FilteredLog> Agent::OpenFilteredLog(const std::vector<std::string>& filters,
                                                    const std::string& path) const {
  if (filters.empty()) return nullptr;
  Result<std::unique_ptr<FilteredLog>> log = FilteredLog::Open(path, filters);
  if (!log.ok()) {
    spdlog::warn("{}", log.status().message());
    return nullptr;
  }
  return std::move(*log);
}

void Agent::StartTees(const std::vector<std::pair<int, int>>& pipes) {
  filtered_stdout_ = OpenFilteredLog(config_.duplicate_stdout_filters,
                                     log_dir_.FilteredStdoutFile(restart_count_));
  filtered_stderr_ = OpenFilteredLog(config_.duplicate_stderr_filters,
                                     log_dir_.FilteredStderrFile(restart_count_));
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const int lr = ranks_[i].local_rank;
    const std::string prefix =
        ExpandLinePrefix(config_.log_line_prefix_template, config_.role, ranks_[i].rank, lr);
    StartTee(pipes[i].first, config_.tee.Stdout(lr), config_.redirects.Stdout(lr), OnConsole(lr),
             log_dir_.StdoutFile(restart_count_, lr), STDOUT_FILENO, prefix, filtered_stdout_.get());
    StartTee(pipes[i].second, config_.tee.Stderr(lr), config_.redirects.Stderr(lr), OnConsole(lr),
             log_dir_.StderrFile(restart_count_, lr), STDERR_FILENO, prefix, filtered_stderr_.get());
  }
}

// A tee'd stream goes to its file and (on a console rank) to the console,
// prefixed; a stream piped only for a filter goes where it would have gone
// without the pipe: its file (--redirects), else the console, unprefixed.
void Agent::StartTee(int pipe_fd, bool tee, bool redirect, bool on_console, const std::string& path,
                     int console_fd, const std::string& prefix, FilteredLog* filtered) {
  if (pipe_fd < 0) return;
  int file_fd = -1;
  if (tee || redirect) {
    file_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file_fd < 0) spdlog::warn("cannot open log file {}: {}", path, strerror(errno));
  }
  const bool console = on_console && (tee || !redirect);
  TeeOptions options;
  options.prefix_console = tee;
  options.filtered = filtered;
  ++open_tees_;
  tees_.push_back(std::make_unique<StreamTee>(io_, pipe_fd, file_fd, console ? console_fd : -1, prefix,
                                              [this] {
                                                --open_tees_;
                                                EndStopIfDrained();
                                              },
                                              options));
}

void Agent::OnWorkerExit(const WorkerExit& e) {
  --running_;
  // A worker that wrote its request and exited: the request wins over the
  // failure (the inotify event may come after the exit).
  if (exclusion_ && state_ == State::kRunning) exclusion_->Check();
  if (heartbeat_) heartbeat_->Forget(e.local_rank);
  EmitWorkerExited(e);
  const bool failed = e.exit_code != 0;
  if (failed && !SignalReceived()) RecordFailure(e);
  if (state_ != State::kRunning) return;
  if (failed) {
    spdlog::warn("worker local_rank {} (pid {}) exited with {}; stopping the worker group",
                 e.local_rank, e.pid,
                 e.exit_code < 0 ? SignalName(-e.exit_code) : std::to_string(e.exit_code));
    StopGroup(SIGTERM, Stop::ToRestart("worker_failed", /*charged=*/true));
  } else if (running_ == 0) {
    StopGroup(SIGTERM, Stop::ToSucceed());
  }
}

void Agent::EmitWorkerExited(const WorkerExit& e) {
  if (!events_) return;
  Json f{{"local_rank", e.local_rank}, {"rank", ranks_[e.local_rank].rank}, {"pid", e.pid}};
  if (e.exit_code < 0) f["signal"] = SignalName(-e.exit_code);
  else f["exit_code"] = e.exit_code;
  f["during"] = StateName(state_);
  events_->Emit("worker_exited", f);
}

void Agent::RecordFailure(const WorkerExit& e) {
  WorkerFailure f;
  f.local_rank = e.local_rank;
  f.rank = ranks_[e.local_rank].rank;
  f.exit_code = e.exit_code;
  f.pid = e.pid;
  f.observed_at_s = e.epoch_seconds;
  if (const WorkerBinding* b = BindingOf(e.local_rank)) f.binding = b->summary;
  const std::string stacks = log_dir_.StacksFile(restart_count_, e.local_rank);
  if (std::ifstream in{stacks}) {  // saved before it was killed for a hang
    std::ostringstream text;
    text << in.rdbuf();
    const std::string frame = InnermostFrame(text.str());
    f.stacks = stacks + (frame.empty() ? "" : " (innermost frame: " + frame + ")");
  }
  const std::string path = log_dir_.ErrorFile(restart_count_, e.local_rank);
  Result<ErrorFileData> data = ReadErrorFile(path);
  if (data.ok()) {
    f.error_file = path;
    f.error = *data;
  } else if (!data.status().IsNotFound()) {
    spdlog::warn("{}", data.status().message());
  }
  failures_.push_back(std::move(f));
}

void Agent::OnMembershipChange(bool charged, const std::string& why) {
  if (events_) {
    events_->Emit("membership_changed",
                  Json{{"why", why}, {"charged", charged}, {"state", StateName(state_)}});
  }
  if (state_ == State::kStopping && stop_->then == Stop::Then::kRestart && stop_->charged &&
      !charged) {
    // A peer's death usually breaks the collective, and so fails a worker,
    // just before its push arrives: the restart under way is the
    // membership's, and is not charged either.
    spdlog::warn("{}; restarting the worker group (not charged to --max-restarts)", why);
    stop_->charged = false;
    stop_->cause = "membership_changed";
    stop_->attempt.membership_changed = true;
    return;
  }
  if (state_ != State::kRunning) return;
  spdlog::warn("{}; restarting the worker group{}", why,
               charged ? "" : " (not charged to --max-restarts)");
  StopGroup(SIGTERM, Stop::ToRestart("membership_changed", charged));
}

std::string Agent::HeartbeatFile(int local_rank) const {
  return log_dir_.RankDir(restart_count_, local_rank) + "/heartbeat";
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
  workers_.SaveStacks(miss.local_rank, "its heartbeat expired");
  StopGroup(SIGTERM, Stop::ToRestart("heartbeat_expired", /*charged=*/true));
}

void Agent::Restart(const Stop& stop) {
  const RestartPolicy::Decision next = policy_.OnAttemptEnd(stop.attempt);
  if (!stop.charged) {
    if (events_) {
      events_->Emit("restart", Json{{"cause", stop.cause}, {"charged", false},
                                    {"restart_count", restart_count_},
                                    {"remaining_restarts", remaining_restarts_}});
    }
    BeginRendezvous();
    return;
  }
  if (next.stop_at_startup) {
    StopAtStartup(stop);
    return;
  }
  if (remaining_restarts_ > 0) {
    --remaining_restarts_;
    ++restart_count_;
    if (next.delay > Duration::zero()) {
      spdlog::warn("restarting the worker group in {:.1f} s (restart {} of {}; --restart-backoff)",
                   ToSecondsValue(next.delay), restart_count_, config_.max_restarts);
    } else {
      spdlog::warn("restarting the worker group (restart {} of {})", restart_count_,
                   config_.max_restarts);
    }
    if (events_) {
      Json f{{"cause", stop.cause}, {"charged", true}, {"restart_count", restart_count_},
             {"remaining_restarts", remaining_restarts_}};
      if (config_.restart_backoff > Seconds(0)) f["delay_s"] = ToSecondsValue(next.delay);
      events_->Emit("restart", f);
    }
    if (next.delay > Duration::zero()) {
      BackOff(next.delay);
    } else {
      BeginRendezvous();
    }
    return;
  }
  ReportFailure();
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
void Agent::StopAtStartup(const Stop& stop) {
  const bool heartbeat = config_.heartbeat_timeout > Seconds(0);
  spdlog::error(
      "the first attempt failed at start-up ({} after {:.1f} s, {}); not restarting it "
      "(--fail-fast-on-startup), exit code {} (do not requeue)",
      stop.cause == "heartbeat_expired" ? "a worker missed its first heartbeat" : "a worker failed",
      ToSecondsValue(stop.attempt.uptime),
      heartbeat ? std::string("no worker touched CTRUN_HEARTBEAT_FILE")
                : fmt::format("under --min-healthy-uptime {:.0f} s", config_.min_healthy_uptime.count()),
      kExitDoNotRequeue);
  if (events_) {
    events_->Emit("startup_failed", Json{{"cause", stop.cause},
                                         {"uptime_s", ToSecondsValue(stop.attempt.uptime)},
                                         {"heartbeat_touched", stop.attempt.heartbeat_touched},
                                         {"remaining_restarts", remaining_restarts_}});
  }
  ReportFailure(kExitDoNotRequeue);
}

// SIGKILL did not end them: uninterruptible sleep (a hung driver, a dead
// file system) or a zombie nobody reaps. Waiting on would hang the job.
void Agent::ReportStuck(const std::vector<StuckProcess>& stuck) {
  Json list = Json::array();
  for (const StuckProcess& p : stuck) {
    spdlog::error("{} of worker local_rank {} (pid {}{}) is still there {:g} s after SIGKILL: {}",
                  p.is_worker ? "the worker process" : "a descendant", p.local_rank, p.pid,
                  p.comm.empty() ? "" : ", " + p.comm, config_.kill_timeout.count(), p.state);
    list.push_back(Json{{"local_rank", p.local_rank}, {"pid", p.pid}, {"worker", p.is_worker},
                        {"comm", p.comm}, {"state", p.state}});
  }
  spdlog::error("ctrun stops waiting for them (--kill-timeout); this node looks unhealthy "
                "(check its GPUs, drivers and file systems); exit code {}",
                kExitWorkersStuck);
  if (events_) {
    events_->Emit("workers_stuck",
                  Json{{"kill_timeout_s", config_.kill_timeout.count()}, {"processes", list}});
  }
}

void Agent::ReportFailure(std::optional<int> forced_code) {
  int code = kExitFailure;
  if (!failures_.empty()) {
    const size_t root = ChooseRootCause(failures_);
    const std::vector<std::string> argv = BuildWorkerArgv(config_, 0);
    const std::string name = EntrypointName(
        argv[0], std::vector<std::string>(argv.begin() + 1, argv.end()), config_.python_exec);
    WriteAll(STDERR_FILENO, FormatFailureReport(name, HostName(), failures_, root) + "\n");
    auto outer = env_.find("TORCHELASTIC_ERROR_FILE");
    const WorkerFailure& rc = failures_[root];
    if (outer != env_.end() && !outer->second.empty()) {
      Status s = WriteAgentErrorFile(outer->second, RootCauseErrorData(rc), rc.exit_code);
      if (!s.ok()) spdlog::warn("{}", s.message());
    }
    if (config_.exit_code_from_root_cause && !forced_code) {
      code = rc.exit_code > 0 ? rc.exit_code : kExitSignalBase - rc.exit_code;
    }
  }
  Finish(State::kFailed, forced_code.value_or(code), ShutdownReason::kFailed);
}

void Agent::HandleSignal(int sig) {
  // Final: the rendezvous is being left (bounded by its own timeouts); the
  // exit code and the report stay as they are.
  if (state_ == State::kSucceeded || state_ == State::kFailed) return;
  spdlog::warn("Received {} death signal, shutting down workers", SignalName(sig));
  if (events_) events_->Emit("signal", Json{{"signal", SignalName(sig)}, {"state", StateName(state_)}});
  switch (state_) {
    case State::kInit:
    case State::kRendezvous:
    case State::kBackoff:
      Finish(State::kFailed, kExitSignalBase + sig, ShutdownReason::kSignal);
      return;
    case State::kRunning:
    case State::kStopping:
      if (state_ == State::kStopping && stop_->then == Stop::Then::kLeaveUnhealthy) {
        // The node leaves as unhealthy whatever comes: the signal keeps exit
        // 4 and the report (the rendezvous must count the node). The first
        // signal lets the workers keep their SIGTERM's grace, as in any
        // stop; a second kills them now. Either way the stop is bounded by
        // --shutdown-grace and --kill-timeout, and the leave by the
        // rendezvous's own timeouts.
        const bool again = stop_->signal != 0;
        stop_->signal = sig;
        if (!again) {
          spdlog::warn("this node is leaving the job as unhealthy: it still exits {} with its report",
                       kExitNodeUnhealthy);
        }
        if (!again || stop_->group_closed) return;  // closed: only the tees' drain is left
        spdlog::warn("second signal: killing the workers now");
        Stop escalated = Stop::ToLeaveUnhealthy(stop_->cause);
        escalated.signal = sig;
        StopGroup(sig, std::move(escalated));
        return;
      }
      if (state_ == State::kStopping && !SignalReceived()) {
        // A stop for a restart (or after the last worker exited) is under
        // way: its workers have their SIGTERM and the grace to finish, e.g.
        // a checkpoint. Let that stop end, then exit for the signal. Only a
        // second signal kills them at once.
        stop_->then = Stop::Then::kExitForSignal;
        stop_->signal = sig;
        return;
      }
      if (SignalReceived()) spdlog::warn("second signal: killing the workers now");
      StopGroup(sig, Stop::ToExitForSignal(sig));
      return;
    case State::kSucceeded:
    case State::kFailed:
      return;
  }
}

bool Agent::SignalReceived() const {
  return stop_ && stop_->then == Stop::Then::kExitForSignal;
}

void Agent::StopGroup(int sig, Stop stop) {
  if (stop_) {  // the same group, escalated
    stop.group_closed = stop_->group_closed;
    stop.attempt = stop_->attempt;
  } else {
    const bool membership = stop.attempt.membership_changed;
    stop.attempt.uptime = Clock::now() - attempt_started_;
    stop.attempt.heartbeat_touched = heartbeat_ && heartbeat_->AnyTouched();
    stop.attempt.membership_changed = membership;
  }
  heartbeat_.reset();
  StopHealthWatch();
  steps_.reset();
  state_ = State::kStopping;
  stop_ = std::move(stop);
  workers_.Close(sig, ToDuration(config_.shutdown_grace), ToDuration(config_.kill_timeout),
                 [this](const std::vector<StuckProcess>& stuck) { OnGroupClosed(stuck); });
}

void Agent::OnGroupClosed(const std::vector<StuckProcess>& stuck) {
  if (!stop_) return;
  stop_->group_closed = true;
  stop_->stuck = stuck;
  if (EndStopIfDrained()) return;
  // Every worker is gone, so what they wrote is in the pipes already; a
  // pipe still open is held by a descendant that left the worker's process
  // group (the orphan guard kills it once ctrun exits). Posted, so reads
  // already completed are written first.
  boost::asio::post(io_, [this] {
    if (!stop_ || !stop_->group_closed) return;  // a new group started meanwhile: its tees are live
    for (auto& tee : tees_) tee->DrainAndFinish();
  });
}

bool Agent::EndStopIfDrained() {
  if (!stop_ || !stop_->group_closed || open_tees_ > 0) return false;
  const Stop stop = std::move(*stop_);
  stop_.reset();
  exclusion_.reset();
  if (!stop.stuck.empty()) {
    ReportStuck(stop.stuck);
    std::string report = "workers outlived SIGKILL by --kill-timeout:";
    for (const StuckProcess& p : stop.stuck) {
      report += fmt::format(" pid {} ({}{})", p.pid, p.comm.empty() ? "" : p.comm + ", ", p.state);
    }
    rdzv_.SetUnhealthyReport(report);
    Finish(State::kFailed, kExitWorkersStuck, ShutdownReason::kUnhealthy);
    return true;
  }
  switch (stop.then) {
    case Stop::Then::kRestart:
      Restart(stop);
      break;
    case Stop::Then::kSucceed:
      Finish(State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
      break;
    case Stop::Then::kExitForSignal:
      Finish(State::kFailed, kExitSignalBase + stop.signal, ShutdownReason::kSignal);
      break;
    case Stop::Then::kLeaveUnhealthy:
      LeaveUnhealthy(stop.cause);
      break;
  }
  return true;
}

void Agent::Finish(State final_state, int code, ShutdownReason reason) {
  state_ = final_state;
  exit_code_ = code;
  if (events_) {
    events_->Emit("finished", Json{{"state", StateName(final_state)}, {"exit_code", code},
                                   {"restart_count", restart_count_}});
  }
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  backoff_timer_.cancel();
  StopHealthWatch();
  exclusion_.reset();
  if (code == kExitSuccess) log_dir_.RemoveIfTemporary();
  rdzv_.Shutdown(reason, [this] { io_.stop(); });
}

}  // namespace ctrun::launcher
