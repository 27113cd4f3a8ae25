// AgentMachine's side of preemption (agent_machine.h's diagram: kSaving,
// kStoppingPreempted; the notice file and the verdict are preemption.h's).
#include <signal.h>

#include <algorithm>

#include "launcher/agent/agent_actions.h"
#include "launcher/agent/agent_machine.h"
#include "launcher/cli/exit_codes.h"
#include "launcher/report/report.h"

namespace ctrun::launcher {

using namespace agent_actions;

// A signal that begins a notice: SIGTERM, SIGINT or --preempt-signal, with
// --preempt-grace, before any notice.
bool AgentMachine::IsPreemptNotice(int sig) const {
  if (!config_.preempt_grace_s || preempt_) return false;
  return sig == SIGTERM || sig == SIGINT || sig == config_.preempt_signal;
}

// Tells the workers (the notice file), the events file and, for a local
// notice, the other nodes; then by state: running, the deadline's timer;
// stopping for a restart, the stop ends the job instead; no group, the
// notice is missed at once.
void AgentMachine::BeginPreempt(WorkerNotice notice, bool tell_peers, Actions& out) {
  preempt_ = notice;
  preempt_began_ = now_.steady;
  AgentAction write = Do(AgentAction::Kind::kWriteNotice);
  write.notice = notice;
  out.push_back(write);
  out.push_back(Log(AgentAction::Level::kWarn, fmt::format("preemption notice ({}): the workers have {:.1f} s to save",
                                                           notice.source, notice.budget_s)));
  out.push_back(Emit("preempt_notice", Json{{"budget_s", notice.budget_s},
                                            {"source", notice.source},
                                            {"deadline_unix_s", notice.deadline_unix_s},
                                            {"state", StateName(state())}}));
  // A budget of 0 (Slurm's limit is nearer than its margin) still goes out:
  // the rendezvous takes a positive time, and the peers then miss at once too.
  if (tell_peers) {
    AgentAction send = Do(AgentAction::Kind::kSendPreemptNotice);
    send.peer_notice = PreemptNotice{std::max(notice.budget_s, 0.001), notice.source, ""};
    out.push_back(send);
  }
  switch (state()) {
    case AgentState::kRunning: {
      phase_ = AgentPhase::kSaving;
      const Duration budget = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(notice.budget_s));
      preempt_deadline_ = now_.steady + budget;
      out.push_back(ArmTimer(AgentTimer::kPreemptDeadline, budget));
      out.push_back(ArmTimer(AgentTimer::kPreemptWaiting, kPreemptWaitingEvery));
      return;
    }
    case AgentState::kStopping:
      // A restart under way ends the job instead; a stop after success, or
      // a node leaving as unhealthy, keeps its own end.
      if (phase_ == AgentPhase::kStoppingForRestart) {
        MissPreempt(fmt::format("the workers were being stopped for a restart ({})", Name(stop_.cause)));
        phase_ = AgentPhase::kStoppingPreempted;
      }
      return;
    case AgentState::kInit:
    case AgentState::kRendezvous:
    case AgentState::kBackoff:
      MissPreempt("no workers were running when it came");
      FinishPreempted(false, out);
      return;
    case AgentState::kSucceeded:
    case AgentState::kFailed:
      return;
  }
}

void AgentMachine::OnPeerPreempt(const PreemptNotice& peer, Actions& out) {
  if (state() == AgentState::kSucceeded || state() == AgentState::kFailed || preempt_) return;
  if (!config_.preempt_grace_s) {
    out.push_back(Log(AgentAction::Level::kWarn,
                      fmt::format("node {} was preempted ({}), but this node runs without --preempt-grace: its "
                                  "workers are not told (give every node the same preemption flags)",
                                  peer.node, peer.source)));
    return;
  }
  WorkerNotice n;
  n.source = peer.node.empty() ? peer.source : fmt::format("node {} ({})", peer.node, peer.source);
  n.budget_s = std::min(peer.remaining_s,
                        PreemptBudget(*config_.preempt_grace_s, config_.slurm_job_end_unix_s, now_.unix_s));
  n.deadline_unix_s = now_.unix_s + n.budget_s;
  BeginPreempt(std::move(n), /*tell_peers=*/false, out);
}

void AgentMachine::PreemptWorkerExited(const AgentEvent& e, Actions& out) {
  if (e.exit_code != 0) {
    MissPreempt(fmt::format("worker local_rank {} exited with {} before the save was confirmed", e.local_rank,
                            e.exit_code < 0 ? SignalName(-e.exit_code) : std::to_string(e.exit_code)));
    StopGroup(SIGTERM, AgentPhase::kStoppingPreempted, Stop{}, out);
  } else if (running_ == 0) {
    StopGroup(SIGTERM, AgentPhase::kStoppingPreempted, Stop{}, out);
  }
}

// The notice's verdict is "missed: `why`" (the first reason stays).
void AgentMachine::MissPreempt(std::string why) {
  if (!preempt_verdict_) preempt_verdict_ = PreemptVerdict{.why = std::move(why)};
}

// Reads the verdict from the workers' markers (unless missed already: the
// shell answers kReadPreemptVerdict), then FinishPreemptedWith.
void AgentMachine::FinishPreempted(bool with_report, Actions& out) {
  out.push_back(CancelTimer(AgentTimer::kPreemptDeadline));
  out.push_back(CancelTimer(AgentTimer::kPreemptWaiting));
  phase_ = AgentPhase::kConcluding;
  preempt_report_ = with_report && ended_with_failures_;
  if (!preempt_verdict_) {
    out.push_back(Do(AgentAction::Kind::kReadPreemptVerdict));
    return;
  }
  FinishPreemptedWith(out);
}

// Reports the verdict (event, stderr, the ended attempt's failure report)
// and finishes with 75 or 76 (0 when the workers finished the job).
void AgentMachine::FinishPreemptedWith(Actions& out) {
  if (preempt_report_) out.push_back(Do(AgentAction::Kind::kPrintFailureReport));
  if (preempt_verdict_->finished) {
    out.push_back(Log(AgentAction::Level::kInfo, "the workers finished the job during the preemption notice (none "
                                                 "saved: nothing is left to do)"));
    Finish(AgentPhase::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded, out);
    return;
  }
  const int code = preempt_verdict_->saved ? kExitPreemptedSaved : kExitPreemptMissed;
  ReportPreemptVerdict(code, out);
  Finish(AgentPhase::kFailed, code, ShutdownReason::kSignal, out);
}

// The decided verdict's stderr line (naming `exit_code`) and its
// preempt_saved / preempt_missed event.
void AgentMachine::ReportPreemptVerdict(int exit_code, Actions& out) {
  const PreemptVerdict& v = *preempt_verdict_;
  const double took = SecondsOf(now_.steady - preempt_began_);
  if (v.saved) {
    out.push_back(Log(AgentAction::Level::kWarn,
                      fmt::format("preempted: every worker saved step {} in {:.1f} s; exiting {} (requeue the job)",
                                  v.step, took, exit_code)));
    out.push_back(Emit("preempt_saved", Json{{"step", v.step}, {"seconds", took}}));
  } else {
    out.push_back(Log(AgentAction::Level::kError,
                      fmt::format("preempted: no save was confirmed: {}; exiting {} (requeue the job: it resumes "
                                  "from its last checkpoint)",
                                  v.why, exit_code)));
    out.push_back(Emit("preempt_missed", Json{{"why", v.why}, {"seconds", took}}));
  }
}

}  // namespace ctrun::launcher
