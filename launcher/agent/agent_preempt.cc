// The agent's side of preemption (launcher/agent/agent.h's diagram,
// "Preemption"; the notice file and the verdict are preemption.h's).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "launcher/agent/agent.h"
#include "launcher/cli/command.h"
#include "launcher/report/report.h"

namespace ctrun::launcher {

namespace {

using Json = nlohmann::ordered_json;

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

bool Agent::IsPreemptNotice(int sig) const {
  if (!config_.preempt_grace || preempt_) return false;
  return sig == SIGTERM || sig == SIGINT || sig == config_.preempt_signal;
}

WorkerNotice Agent::LocalNotice(int sig) const {
  const double now = UnixNow();
  WorkerNotice n;
  n.source = SignalName(sig);
  n.budget_s = PreemptBudget(config_.preempt_grace->count(), config_.slurm_job_end_unix_s, now);
  n.deadline_unix_s = now + n.budget_s;
  return n;
}

void Agent::BeginPreempt(WorkerNotice notice, bool tell_peers) {
  preempt_ = notice;
  preempt_began_ = Clock::now();
  if (Status s = WriteNoticeFile(PreemptNoticeFile(log_dir_), notice); !s.ok()) spdlog::error("{}", s.message());
  spdlog::warn("preemption notice ({}): the workers have {:.1f} s to save", notice.source, notice.budget_s);
  if (events_) {
    events_->Emit("preempt_notice", Json{{"budget_s", notice.budget_s},
                                        {"source", notice.source},
                                        {"deadline_unix_s", notice.deadline_unix_s},
                                        {"state", StateName(state_)}});
  }
  // A budget of 0 (Slurm's limit is nearer than its margin) still goes out:
  // the rendezvous takes a positive time, and the peers then miss at once too.
  if (tell_peers) rdzv_.SendPreemptNotice(PreemptNotice{std::max(notice.budget_s, 0.001), notice.source, ""});
  switch (state_) {
    case State::kRunning:
      preempt_timer_.expires_after(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(notice.budget_s)));
      preempt_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) OnPreemptDeadline();
      });
      ArmPreemptWaitingLine();
      return;
    case State::kStopping:
      // A restart under way ends the job instead; a stop after success, or
      // a node leaving as unhealthy, keeps its own end.
      if (stop_->then == Stop::Then::kRestart) {
        MissPreempt(fmt::format("the workers were being stopped for a restart ({})", Name(stop_->cause)));
        stop_->then = Stop::Then::kPreempted;
      }
      return;
    case State::kInit:
    case State::kRendezvous:
    case State::kBackoff:
      MissPreempt("no workers were running when it came");
      FinishPreempted({});
      return;
    case State::kSucceeded:
    case State::kFailed:
      return;
  }
}

void Agent::ArmPreemptWaitingLine() {
  preempt_waiting_timer_.expires_after(kPreemptWaitingEvery);
  preempt_waiting_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || state_ != State::kRunning || !preempt_ || preempt_verdict_) return;
    const double stop_in = std::chrono::duration<double>(preempt_timer_.expiry() - Clock::now()).count();
    spdlog::info("{}", PreemptWaitingLine(SavedCount(PreemptMarkers()), attempt_->running,
                                          static_cast<int>(attempt_->ranks.size()), stop_in));
    ArmPreemptWaitingLine();
  });
}

std::vector<std::string> Agent::PreemptMarkers() const {
  std::vector<std::string> markers;
  for (int lr = 0; lr < config_.nproc_per_node; ++lr) markers.push_back(PreemptSavedFile(log_dir_, restart_count_, lr));
  return markers;
}

void Agent::OnPeerPreempt(const PreemptNotice& peer) {
  if (state_ == State::kSucceeded || state_ == State::kFailed || preempt_) return;
  if (!config_.preempt_grace) {
    spdlog::warn("node {} was preempted ({}), but this node runs without --preempt-grace: its workers are "
                 "not told (give every node the same preemption flags)",
                 peer.node, peer.source);
    return;
  }
  const double now = UnixNow();
  WorkerNotice n;
  n.source = peer.node.empty() ? peer.source : fmt::format("node {} ({})", peer.node, peer.source);
  n.budget_s = std::min(peer.remaining_s,
                        PreemptBudget(config_.preempt_grace->count(), config_.slurm_job_end_unix_s, now));
  n.deadline_unix_s = now + n.budget_s;
  BeginPreempt(std::move(n), /*tell_peers=*/false);
}

void Agent::OnPreemptDeadline() {
  if (state_ != State::kRunning) return;
  MissPreempt(fmt::format("the deadline ({:.1f} s) passed with {} of {} workers still running", preempt_->budget_s,
                          attempt_->running, attempt_->ranks.size()));
  StopGroup(SIGTERM, Stop::ToPreempted());
}

void Agent::PreemptWorkerExited(const WorkerExit& e) {
  if (e.exit_code != 0) {
    MissPreempt(fmt::format("worker local_rank {} exited with {} before the save was confirmed", e.local_rank,
                            e.exit_code < 0 ? SignalName(-e.exit_code) : std::to_string(e.exit_code)));
    StopGroup(SIGTERM, Stop::ToPreempted());
  } else if (attempt_->running == 0) {
    StopGroup(SIGTERM, Stop::ToPreempted());
  }
}

void Agent::MissPreempt(std::string why) {
  if (!preempt_verdict_) preempt_verdict_ = PreemptVerdict{.why = std::move(why)};
}

void Agent::FinishPreempted(const std::vector<WorkerFailure>& failures) {
  preempt_timer_.cancel();
  preempt_waiting_timer_.cancel();
  if (!preempt_verdict_) preempt_verdict_ = ReadVerdict(PreemptMarkers());
  if (!failures.empty()) PrintFailureReport(failures, std::nullopt);
  if (preempt_verdict_->finished) {
    spdlog::info("the workers finished the job during the preemption notice (none saved: nothing is left to do)");
    Finish(State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
    return;
  }
  const int code = preempt_verdict_->saved ? kExitPreemptedSaved : kExitPreemptMissed;
  ReportPreemptVerdict(code);
  Finish(State::kFailed, code, ShutdownReason::kSignal);
}

void Agent::ReportPreemptVerdict(int exit_code) {
  const PreemptVerdict& v = *preempt_verdict_;
  const double took = std::chrono::duration<double>(Clock::now() - preempt_began_).count();
  if (v.saved) {
    spdlog::warn("preempted: every worker saved step {} in {:.1f} s; exiting {} (requeue the job)", v.step, took,
                 exit_code);
    if (events_) events_->Emit("preempt_saved", Json{{"step", v.step}, {"seconds", took}});
  } else {
    spdlog::error("preempted: no save was confirmed: {}; exiting {} (requeue the job: it resumes from its last "
                  "checkpoint)",
                  v.why, exit_code);
    if (events_) events_->Emit("preempt_missed", Json{{"why", v.why}, {"seconds", took}});
  }
}

}  // namespace ctrun::launcher
