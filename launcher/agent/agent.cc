// The agent's shell (launcher/agent/agent.h): events into the AgentMachine,
// its actions out; one started group's I/O is in agent_attempt.cc.
#include "launcher/agent/agent.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "launcher/net/local_address.h"
#include "launcher/report/failure_report.h"
#include "launcher/report/report.h"

namespace ctrun::launcher {

AgentNow Agent::Now() {
  return AgentNow{Clock::now(),
                  std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()};
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
      liveness_(&RealLivenessWatchers()),
      machine_(std::in_place, AgentMachineConfig::Of(config, false, Duration::zero())),
      steps_(events, rdzv::StragglerParams{config.straggler_factor, config.straggler_intervals}) {
  for (int sig : config_.signals_to_handle) signals_.add(sig);
  for (int i = 0; i < kAgentTimers; ++i) timers_.emplace_back(io);
}

void Agent::Start() {
  machine_.emplace(AgentMachineConfig::Of(config_, health_ != nullptr, launch_window_));
  ArmSignals();
  if (config_.share_logs) {
    if (rdzv::LogSinkFactory sinks = rdzv_.LogSinks()) {
      shipper_ = std::make_unique<LogShipper>(std::move(sinks));
    } else {
      spdlog::warn("--share-logs: this rendezvous has no server that keeps logs (only the c10d backend with "
                   "--rdzv-endpoint, or ctrund, has one): the workers' lines stay on this node");
    }
  }
  rdzv_.OnChange([this](bool charged, const std::string& why) { Feed(AgentEvent::MembershipChanged(charged, why)); });
  rdzv_.OnPreemptNotice([this](const PreemptNotice& notice) { Feed(AgentEvent::PeerPreempt(notice)); });
  rdzv_.OnRunFailed([this](const std::optional<rdzv::VerdictSummary>& v) { Feed(AgentEvent::PeerFailed(v)); });
  rdzv_.TrackSteps(
      [this]() -> std::optional<rdzv::StepReport> {
        if (state() != State::kRunning) return std::nullopt;
        return steps_.Report();
      },
      [this](const rdzv::StragglerChange& change) { steps_.OnChange(change, machine_->restart_count()); });
  Feed(AgentEvent::Start());
}

void Agent::ArmSignals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    HandleSignal(sig);
    ArmSignals();
  });
}

void Agent::HandleSignal(int sig) { Feed(AgentEvent::Signal(sig)); }

std::string Agent::ExcludeNodeFile() const { return launcher::ExcludeNodeFile(log_dir_); }

void Agent::Feed(AgentEvent event) {
  queue_.push_back(std::move(event));
  if (feeding_) return;
  feeding_ = true;
  while (!queue_.empty()) {
    const AgentEvent next = std::move(queue_.front());
    queue_.pop_front();
    for (const AgentAction& action : machine_->Step(next, Now())) Run(action);
  }
  feeding_ = false;
}

void Agent::Run(const AgentAction& a) {
  using K = AgentAction::Kind;
  switch (a.kind) {
    case K::kLog:
      if (a.level == AgentAction::Level::kError) spdlog::error("{}", a.text);
      else if (a.level == AgentAction::Level::kWarn) spdlog::warn("{}", a.text);
      else spdlog::info("{}", a.text);
      return;
    case K::kEmit:
      if (events_) events_->Emit(a.text, a.fields);
      return;
    case K::kPrepareAttempt: {
      const Status s = log_dir_.PrepareAttempt(a.restart_count, config_.nproc_per_node);
      return Feed(AgentEvent::AttemptPrepared(s.ok(), s.message()));
    }
    case K::kClearStore:
      if (store_) store_->Clear();
      return;
    case K::kRunHealthCheck: return RunHealthCheck(a.flag);
    case K::kNextRound: return NextRound();
    case K::kObserveRound:
      if (round_observer_) round_observer_(round_);
      return;
    case K::kStartWorkers: return StartWorkers();
    case K::kReportExecFailure: return ReportExecFailure(a.text);
    case K::kWatchWorkers: return WatchWorkers();
    case K::kRecordFailure: return RecordFailure(a);
    case K::kSaveStacks: return workers_.SaveStacks(a.local_rank, a.text);
    case K::kCloseGroup: return CloseGroup(a);
    case K::kEndWhenDrained: return EndWhenDrained();
    case K::kArmTimer: return ArmTimer(a.timer, a.grace);
    case K::kCancelTimer:
      timers_[static_cast<size_t>(a.timer)].cancel();
      return;
    case K::kCancelHealthCheck:
      if (health_) health_->Cancel();
      return;
    case K::kWriteNotice:
      if (Status s = WriteNoticeFile(PreemptNoticeFile(log_dir_), a.notice); !s.ok()) spdlog::error("{}", s.message());
      return;
    case K::kSendPreemptNotice: return rdzv_.SendPreemptNotice(a.peer_notice);
    case K::kLogPreemptWaiting:
      spdlog::info("{}", PreemptWaitingLine(SavedCount(PreemptMarkers()), a.running, a.workers, a.seconds));
      return;
    case K::kReadPreemptVerdict: return Feed(AgentEvent::PreemptVerdictRead(ReadVerdict(PreemptMarkers())));
    case K::kPrintFailureReport:
      PrintFailureReport(a.code);
      return;
    case K::kReportStuck: return ReportStuck(stuck_, config_.kill_timeout.count(), events_);
    case K::kSetUnhealthyReport: return rdzv_.SetUnhealthyReport(a.text);
    case K::kPrintUnhealthy:
      WriteAll(STDERR_FILENO, FormatUnhealthyBlock(HostName(), a.text));
      return;
    case K::kResolveVerdict: {
      const std::optional<rdzv::VerdictSummary> local = last_report_ ? LocalVerdict(*last_report_) : std::nullopt;
      return rdzv_.ResolveVerdict(
          local, [this](std::optional<rdzv::VerdictSummary> v) { Feed(AgentEvent::VerdictResolved(std::move(v))); });
    }
    case K::kSetFailureVerdict: return rdzv_.SetFailureVerdict(*a.verdict);
    case K::kFinish: return Finish(a.reason, a.flag);
  }
}

void Agent::NextRound() {
  rdzv_.NextRound([this](const Result<Round>& round) {
    if (!round.ok()) {
      return Feed(AgentEvent::RoundFailed(round.status().message(),
                                          round.status().code() == Status::Code::kResourceExhausted));
    }
    round_ = *round;
    Feed(AgentEvent::RoundReady(*round));
  });
}

void Agent::RunHealthCheck(bool periodic) {
  health_->Run([this, periodic](const HealthResult& r) {
    Feed(AgentEvent::HealthChecked(periodic, r.healthy, health_->command(), r.failure,
                                   r.healthy ? "" : FormatHealthReport(health_->command(), r), r.last_lines));
  });
}

void Agent::ArmTimer(AgentTimer timer, Duration delay) {
  boost::asio::steady_timer& t = timers_[static_cast<size_t>(timer)];
  t.expires_after(delay);
  t.async_wait([this, timer](const boost::system::error_code& ec) {
    if (!ec) Feed(AgentEvent::Timer(timer));
  });
}

std::vector<std::string> Agent::PreemptMarkers() const {
  std::vector<std::string> markers;
  for (int lr = 0; lr < config_.nproc_per_node; ++lr) {
    markers.push_back(PreemptSavedFile(log_dir_, machine_->restart_count(), lr));
  }
  return markers;
}

void Agent::Finish(ShutdownReason reason, bool succeeded) {
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  for (boost::asio::steady_timer& t : timers_) t.cancel();
  if (health_) health_->Cancel();
  attempt_.reset();  // one whose workers could not start; any other has ended already
  // The last lines out before the rendezvous (maybe this agent's own server) goes.
  if (shipper_) shipper_->Stop(kShareLogsFlush);
  if (succeeded) log_dir_.RemoveIfTemporary();
  rdzv_.Shutdown(reason, [this] { io_.stop(); });
}

}  // namespace ctrun::launcher
