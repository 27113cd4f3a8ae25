// The agent's stop of its worker group, and signals (launcher/agent/agent.h:
// every way out of kRunning is one Stop through StopGroup).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <chrono>

#include "launcher/agent/agent.h"
#include "launcher/report/failure_report.h"
#include "launcher/report/report.h"
#include "launcher/net/local_address.h"

namespace ctrun::launcher {

void Agent::HandleSignal(int sig) {
  // Final: the rendezvous is being left (bounded by its own timeouts); the
  // exit code and the report stay as they are.
  if (state_ == State::kSucceeded || state_ == State::kFailed) return;
  if (IsPreemptNotice(sig)) {
    BeginPreempt(LocalNotice(sig), /*tell_peers=*/true);
    return;
  }
  if (preempt_ && sig == config_.preempt_signal) {
    spdlog::info("{} again: the preemption notice is under way already", SignalName(sig));
    return;
  }
  // A second SIGTERM or SIGINT during a notice stops the workers now.
  if (preempt_ && !preempt_verdict_) {
    MissPreempt(fmt::format("a second signal ({}) stopped the workers", SignalName(sig)));
    ReportPreemptVerdict(kExitSignalBase + sig);
  }
  spdlog::warn("Received {} death signal, shutting down workers", SignalName(sig));
  if (events_) {
    events_->Emit("signal", nlohmann::ordered_json{{"signal", SignalName(sig)}, {"state", StateName(state_)}});
  }
  switch (state_) {
    case State::kInit:
    case State::kRendezvous:
    case State::kBackoff:
      Finish(State::kFailed, kExitSignalBase + sig, ShutdownReason::kSignal);
      return;
    case State::kRunning:
    case State::kStopping:
      if (state_ == State::kStopping && stop_->then == Stop::Then::kLeaveUnhealthy) {
        SignalWhileLeaving(sig);
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

// The node leaves as unhealthy whatever comes: the signal keeps exit 4 and
// the report (the rendezvous must count the node). The first signal lets the
// workers keep their SIGTERM's grace, as in any stop; a second kills them
// now. Either way the stop is bounded by --shutdown-grace and
// --kill-timeout, and the leave by the rendezvous's own timeouts.
void Agent::SignalWhileLeaving(int sig) {
  const bool again = stop_->signal != 0;
  stop_->signal = sig;
  if (!again) {
    spdlog::warn("this node is leaving the job as unhealthy: it still exits {} with its report",
                 kExitNodeUnhealthy);
  }
  if (!again || stop_->group_closed) return;  // closed: only the tees' drain is left
  spdlog::warn("second signal: killing the workers now");
  Stop escalated = Stop::ToLeaveUnhealthy(stop_->report);
  escalated.signal = sig;
  StopGroup(sig, std::move(escalated));
}

bool Agent::SignalReceived() const {
  return stop_ && stop_->then == Stop::Then::kExitForSignal;
}

void Agent::StopGroup(int sig, Stop stop, std::optional<Duration> grace) {
  if (stop_) {  // the same group, escalated
    stop.group_closed = stop_->group_closed;
    stop.attempt = stop_->attempt;
  } else {
    stop.attempt.uptime = Clock::now() - attempt_->started;
    stop.attempt.heartbeat_touched = attempt_->heartbeat && attempt_->heartbeat->AnyTouched();
  }
  attempt_->heartbeat.reset();
  StopHealthWatch();
  steps_.Stop();
  state_ = State::kStopping;
  stop_ = std::move(stop);
  workers_.Close(sig, grace.value_or(ToDuration(config_.shutdown_grace)), ToDuration(config_.kill_timeout),
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
    // A new group started meanwhile: its tees are live.
    if (!stop_ || !stop_->group_closed || !attempt_) return;
    attempt_->tees->DrainAll();
  });
}

bool Agent::EndStopIfDrained() {
  if (!stop_ || !stop_->group_closed || !attempt_ || attempt_->tees->open() > 0) return false;
  Stop stop = std::move(*stop_);
  stop_.reset();
  // The attempt ends here; its tees are kept, inert, until the next start.
  const std::vector<WorkerFailure> failures = std::move(attempt_->failures);
  // Once per failed attempt, before the restart or the exit (`ctrun status --why`).
  if (!failures.empty()) {
    std::vector<FailureContext> contexts = std::move(attempt_->failure_contexts);
    // Every tee is at its end: a worker's kept stderr is whole.
    for (size_t i = 0; i < failures.size() && i < contexts.size(); ++i) {
      contexts[i].stderr_tail = attempt_->tees->StderrTail(static_cast<size_t>(failures[i].local_rank));
    }
    last_report_ = FailureReportOf(attempt_->round.round, HostName(), failures, contexts);
    // What the restart policy needs of them: a bad launch, the same error again.
    std::vector<std::optional<uint64_t>> steps;
    for (const FailureContext& c : contexts) steps.push_back(c.steps);
    NoteAttemptFailures(last_report_->failures, steps, static_cast<int>(attempt_->ranks.size()), stop.attempt);
    if (stop.attempt.bad_launch) {
      for (rdzv::WorkerFailureInfo& f : last_report_->failures) f.bad_launch = true;
    }
    rdzv_.ReportFailures(*last_report_);
  }
  ended_tees_ = std::move(attempt_->tees);
  attempt_.reset();
  if (!stop.stuck.empty()) {
    ReportStuck(stop.stuck, config_.kill_timeout.count(), events_);
    rdzv_.SetUnhealthyReport(StuckReport(stop.stuck));
    Finish(State::kFailed, kExitWorkersStuck, ShutdownReason::kUnhealthy);
    return true;
  }
  switch (stop.then) {
    case Stop::Then::kRestart:
      Restart(stop, failures);
      break;
    case Stop::Then::kSucceed:
      Finish(State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
      break;
    case Stop::Then::kExitForSignal:
      Finish(State::kFailed, kExitSignalBase + stop.signal, ShutdownReason::kSignal);
      break;
    case Stop::Then::kLeaveUnhealthy:
      LeaveUnhealthy(stop.report);
      break;
    case Stop::Then::kPreempted:
      FinishPreempted(failures);
      break;
    case Stop::Then::kPeerFailed:
      FinishFailed(kExitFailure, ShutdownReason::kFailed);
      break;
  }
  return true;
}

}  // namespace ctrun::launcher
