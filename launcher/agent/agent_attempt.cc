// One started group's I/O for the agent's shell (launcher/agent/agent.h):
// its start and watches, its workers' exits and failures, its close, its
// failure report and its end.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <chrono>

#include "launcher/agent/agent.h"
#include "launcher/report/failure_report.h"
#include "launcher/cli/command.h"
#include "launcher/forensics/oom_kills.h"
#include "launcher/report/error_file.h"
#include "launcher/net/local_address.h"

namespace ctrun::launcher {

void Agent::StartWorkers() {
  ended_tees_.reset();
  last_report_.reset();
  ended_failures_.clear();
  attempt_ = std::make_unique<Attempt>();
  attempt_->round = round_;
  attempt_->ranks = AssignRanks(round_.group_rank, round_.local_world_sizes);
  const AttemptInputs inputs{config_, env_, log_dir_, machine_->restart_count(), bindings_};
  const std::vector<WorkerSpec> specs = MakeWorkerSpecs(inputs, round_, attempt_->ranks);
  attempt_->exits.resize(specs.size());
  // Armed before the workers start, so no request can be missed; a stale
  // one is removed.
  attempt_->exclusion = std::make_unique<ExclusionWatch>(
      io_, ExcludeNodeFile(), [this](const std::string& reason) { Feed(AgentEvent::ExclusionRequest(reason)); });
  const Status s = workers_.Start(
      specs, [this](const WorkerExit& exit) { OnWorkerExit(exit); }, &attempt_->pipes);
  if (!s.ok()) return Feed(AgentEvent::StartFailed(s.message()));
  // The OOM killer's count of the workers' memory cgroup, before they run
  // (a failure's evidence: oom_kills.h).
  if (const std::vector<pid_t> pids = workers_.Pids(); !pids.empty()) {
    attempt_->oom_file = OomKillsFileOf(pids.front());
    if (attempt_->oom_file) attempt_->oom_kills_at_start = ReadOomKillsFile(*attempt_->oom_file);
  }
  Feed(AgentEvent::WorkersStarted(static_cast<int>(specs.size())));
}

void Agent::WatchWorkers() {
  const std::vector<pid_t> pids = workers_.Pids();
  const std::vector<WorkerRanks>& ranks = attempt_->ranks;
  const int restart_count = machine_->restart_count();
  for (size_t i = 0; events_ && i < ranks.size() && i < pids.size(); ++i) {
    nlohmann::ordered_json f{{"local_rank", ranks[i].local_rank}, {"rank", ranks[i].rank}, {"pid", pids[i]},
                             {"restart_count", restart_count}};
    if (const WorkerBinding* b = BindingOf(bindings_, ranks[i].local_rank)) {
      f["cpus"] = b->cpus;
      f["memory_nodes"] = b->memory_nodes;
      f["binding"] = b->summary;
    }
    events_->Emit("worker_started", f);
  }
  if (config_.heartbeat_timeout > Seconds(0)) {
    std::vector<std::string> files;
    for (const WorkerRanks& r : ranks) files.push_back(HeartbeatFile(log_dir_, restart_count, r.local_rank));
    steps_.Watch(liveness_->WatchSteps(io_, files), attempt_->round.round, ranks);
    const HeartbeatTimeouts timeouts{
        ToDuration(config_.heartbeat_initial_timeout.value_or(config_.heartbeat_timeout)),
        ToDuration(config_.heartbeat_timeout)};
    attempt_->heartbeat = liveness_->WatchHeartbeats(io_, timeouts, std::move(files),
                                                     [this](const HeartbeatMiss& miss) { OnHeartbeatMiss(miss); });
  }
  TeePlan plan = MakeTeePlan(AttemptInputs{config_, env_, log_dir_, restart_count, bindings_}, ranks);
  plan.shipper = shipper_.get();
  attempt_->tees->Start(io_, plan, attempt_->pipes, [this] {
    if (attempt_ && state() == State::kStopping && machine_->group_closed() && attempt_->tees->open() == 0) {
      EndAttempt();
    }
  });
}

void Agent::OnWorkerExit(const WorkerExit& exit) {
  if (!attempt_) return;  // its attempt has ended: nothing of it is left to update
  attempt_->exits[exit.local_rank] = exit;
  // A worker that wrote its request and exited: the request wins over the
  // failure (the inotify event may come after the exit).
  if (attempt_->exclusion && state() == State::kRunning) attempt_->exclusion->Check();
  if (attempt_->heartbeat) attempt_->heartbeat->Forget(exit.local_rank);
  Feed(AgentEvent::WorkerExited(exit.local_rank, attempt_->ranks[exit.local_rank].rank, exit.pid, exit.exit_code));
}

void Agent::OnHeartbeatMiss(const HeartbeatMiss& miss) {
  const std::vector<pid_t> pids = workers_.Pids();
  const pid_t pid = miss.local_rank < static_cast<int>(pids.size()) ? pids[miss.local_rank] : 0;
  Feed(AgentEvent::HeartbeatMissed(miss.local_rank, pid, std::chrono::duration<double>(miss.silent_for).count(),
                                   miss.ever_touched));
}

void Agent::RecordFailure(const AgentAction& a) {
  const int lr = a.local_rank;
  const WorkerExit& exit = attempt_->exits[lr];
  const int restart_count = machine_->restart_count();
  attempt_->failures.push_back(ReadWorkerFailure(exit, attempt_->ranks[lr].rank, BindingOf(bindings_, lr),
                                                 log_dir_.StacksFile(restart_count, lr),
                                                 log_dir_.ErrorFile(restart_count, lr)));
  // Its stacks saved: it hung, a cause, not a consequence of the stop.
  const bool hung = a.hung || !attempt_->failures.back().stacks.empty();
  FailureContext context{a.flag && !hung, Now().unix_s};
  context.oom_kills_before = attempt_->oom_kills_at_start;
  if (attempt_->oom_file) context.oom_kills_after = ReadOomKillsFile(*attempt_->oom_file);
  context.runtime_s = a.seconds;
  context.max_rss_kib = exit.max_rss_kib;
  context.hung = hung;
  context.steps = steps_.StepsOf(lr);
  attempt_->failure_contexts.push_back(std::move(context));
}

void Agent::ReportExecFailure(const std::string& error) {
  std::vector<int> ranks;
  for (const WorkerRanks& r : attempt_->ranks) ranks.push_back(r.rank);
  last_report_ = ExecFailureReport(attempt_->round.round, HostName(), ranks, error, Now().unix_s);
  rdzv_.ReportFailures(*last_report_);
  attempt_.reset();
}

void Agent::CloseGroup(const AgentAction& a) {
  if (!attempt_) return;
  if (a.flag) heartbeat_touched_ = attempt_->heartbeat && attempt_->heartbeat->AnyTouched();
  attempt_->heartbeat.reset();
  steps_.Stop();
  workers_.Close(a.signal, a.grace, ToDuration(config_.kill_timeout), [this](const std::vector<StuckProcess>& stuck) {
    stuck_ = stuck;
    Feed(AgentEvent::GroupClosed(stuck.empty() ? "" : StuckReport(stuck)));
  });
}

void Agent::EndWhenDrained() {
  if (!attempt_ || state() != State::kStopping || !machine_->group_closed()) return;
  if (attempt_->tees->open() == 0) return EndAttempt();
  // Every worker is gone, so what they wrote is in the pipes already; a
  // pipe still open is held by a descendant that left the worker's process
  // group (the orphan guard kills it once ctrun exits). Posted, so reads
  // already completed are written first.
  boost::asio::post(io_, [this] {
    // A new group started meanwhile: its tees are live.
    if (!attempt_ || state() != State::kStopping || !machine_->group_closed()) return;
    attempt_->tees->DrainAll();
  });
}

void Agent::EndAttempt() {
  AgentEvent e = AgentEvent::AttemptEnded(false);
  e.notes.heartbeat_touched = heartbeat_touched_;
  // The attempt ends here; its tees are kept, inert, until the next start.
  ended_failures_ = std::move(attempt_->failures);
  e.failures = !ended_failures_.empty();
  // Once per failed attempt, before the restart or the exit (`ctrun status --why`).
  if (e.failures) {
    std::vector<FailureContext> contexts = std::move(attempt_->failure_contexts);
    // Every tee is at its end: a worker's kept stderr is whole.
    for (size_t i = 0; i < ended_failures_.size() && i < contexts.size(); ++i) {
      contexts[i].stderr_tail = attempt_->tees->StderrTail(static_cast<size_t>(ended_failures_[i].local_rank));
    }
    last_report_ = FailureReportOf(attempt_->round.round, HostName(), ended_failures_, contexts);
    // What the restart policy needs of them: a bad launch, the same error again.
    std::vector<std::optional<uint64_t>> steps;
    for (const FailureContext& c : contexts) steps.push_back(c.steps);
    NoteAttemptFailures(last_report_->failures, steps, static_cast<int>(attempt_->ranks.size()), e.notes);
    if (e.notes.bad_launch) {
      for (rdzv::WorkerFailureInfo& f : last_report_->failures) f.bad_launch = true;
    }
    rdzv_.ReportFailures(*last_report_);
  }
  e.report_code = FailureExitCode(ended_failures_, config_.exit_code_from_root_cause);
  ended_tees_ = std::move(attempt_->tees);
  attempt_.reset();
  Feed(std::move(e));
}

int Agent::PrintFailureReport(std::optional<int> forced) {
  std::string name;
  std::string host;
  if (!ended_failures_.empty()) {
    const std::vector<std::string> argv = BuildWorkerArgv(config_, 0);
    name = EntrypointName(argv[0], std::vector<std::string>(argv.begin() + 1, argv.end()), config_.python_exec);
    host = HostName();
  }
  const FailureOutcome out = DecideFailure(ended_failures_, name, host, config_.exit_code_from_root_cause, forced);
  if (out.root) {
    WriteAll(STDERR_FILENO, out.report + "\n");
    auto outer = env_.find("TORCHELASTIC_ERROR_FILE");
    const WorkerFailure& rc = ended_failures_[*out.root];
    if (outer != env_.end() && !outer->second.empty()) {
      Status s = WriteAgentErrorFile(outer->second, RootCauseErrorData(rc), rc.exit_code);
      if (!s.ok()) spdlog::warn("{}", s.message());
    }
  }
  return out.exit_code;
}

}  // namespace ctrun::launcher
