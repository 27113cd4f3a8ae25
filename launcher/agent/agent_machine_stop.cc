// AgentMachine's stop of the worker group, signals, node health and the
// verdict of a failed end (agent_machine.h's diagram).
#include <signal.h>

#include <algorithm>

#include "base/text_match.h"
#include "launcher/agent/agent_actions.h"
#include "launcher/agent/agent_machine.h"
#include "launcher/cli/exit_codes.h"
#include "launcher/report/report.h"

namespace ctrun::launcher {

using namespace agent_actions;

// The one way to stop the group: sends `sig` (SIGKILL after the grace) and
// makes `phase` with `stop` the stop under way; it ends at kAttemptEnded.
// Called again during a stop (a second signal), it escalates that stop.
void AgentMachine::StopGroup(int sig, AgentPhase phase, Stop stop, Actions& out, std::optional<Duration> grace) {
  const bool first = state() != AgentState::kStopping;
  if (first) {
    stop.attempt.uptime = now_.steady - started_;
  } else {  // the same group, escalated
    stop.group_closed = stop_.group_closed;
    stop.stuck = stop_.stuck;
    stop.attempt = stop_.attempt;
  }
  phase_ = phase;
  stop_ = std::move(stop);
  out.push_back(CancelTimer(AgentTimer::kHealth));
  out.push_back(Do(AgentAction::Kind::kCancelHealthCheck));
  AgentAction close = Do(AgentAction::Kind::kCloseGroup);
  close.signal = sig;
  close.grace = grace.value_or(config_.shutdown_grace);
  close.flag = first;
  out.push_back(close);
}

void AgentMachine::OnSignal(int sig, Actions& out) {
  // Final: the rendezvous is being left (bounded by its own timeouts); the
  // exit code and the report stay as they are.
  if (state() == AgentState::kSucceeded || state() == AgentState::kFailed) return;
  if (IsPreemptNotice(sig)) {
    WorkerNotice n;
    n.source = SignalName(sig);
    n.budget_s = PreemptBudget(*config_.preempt_grace_s, config_.slurm_job_end_unix_s, now_.unix_s);
    n.deadline_unix_s = now_.unix_s + n.budget_s;
    BeginPreempt(std::move(n), /*tell_peers=*/true, out);
    return;
  }
  if (preempt_ && sig == config_.preempt_signal) {
    out.push_back(Log(AgentAction::Level::kInfo,
                      SignalName(sig) + " again: the preemption notice is under way already"));
    return;
  }
  // A second SIGTERM or SIGINT during a notice stops the workers now.
  if (preempt_ && !preempt_verdict_) {
    MissPreempt(fmt::format("a second signal ({}) stopped the workers", SignalName(sig)));
    ReportPreemptVerdict(kExitSignalBase + sig, out);
  }
  out.push_back(Log(AgentAction::Level::kWarn, fmt::format("Received {} death signal, shutting down workers",
                                                           SignalName(sig))));
  out.push_back(Emit("signal", Json{{"signal", SignalName(sig)}, {"state", StateName(state())}}));
  switch (state()) {
    case AgentState::kInit:
    case AgentState::kRendezvous:
    case AgentState::kBackoff:
      Finish(AgentPhase::kFailed, kExitSignalBase + sig, ShutdownReason::kSignal, out);
      return;
    case AgentState::kRunning:
    case AgentState::kStopping: {
      if (phase_ == AgentPhase::kLeavingUnhealthy) {
        SignalWhileLeaving(sig, out);
        return;
      }
      const bool again = phase_ == AgentPhase::kStoppingForSignal;
      if (state() == AgentState::kStopping && !again) {
        // A stop for a restart (or after the last worker exited) is under
        // way: its workers have their SIGTERM and the grace to finish, e.g.
        // a checkpoint. Let that stop end, then exit for the signal. Only a
        // second signal kills them at once.
        phase_ = AgentPhase::kStoppingForSignal;
        stop_.signal = sig;
        return;
      }
      if (again) out.push_back(Log(AgentAction::Level::kWarn, "second signal: killing the workers now"));
      Stop stop;
      stop.signal = sig;
      StopGroup(sig, AgentPhase::kStoppingForSignal, std::move(stop), out);
      return;
    }
    case AgentState::kSucceeded:
    case AgentState::kFailed:
      return;
  }
}

// The node leaves as unhealthy whatever comes: the signal keeps exit 4 and
// the report (the rendezvous must count the node). The first signal lets the
// workers keep their SIGTERM's grace, as in any stop; a second kills them
// now. Either way the stop is bounded by --shutdown-grace and
// --kill-timeout, and the leave by the rendezvous's own timeouts.
void AgentMachine::SignalWhileLeaving(int sig, Actions& out) {
  const bool again = stop_.signal != 0;
  stop_.signal = sig;
  if (!again) {
    out.push_back(Log(AgentAction::Level::kWarn,
                      fmt::format("this node is leaving the job as unhealthy: it still exits {} with its report",
                                  kExitNodeUnhealthy)));
  }
  if (!again || stop_.group_closed) return;  // closed: only the output's drain is left
  out.push_back(Log(AgentAction::Level::kWarn, "second signal: killing the workers now"));
  Stop escalated;
  escalated.report = stop_.report;
  escalated.signal = sig;
  StopGroup(sig, AgentPhase::kLeavingUnhealthy, std::move(escalated), out);
}

void AgentMachine::OnHealthChecked(const AgentEvent& e, Actions& out) {
  if (e.periodic) {
    if (state() != AgentState::kRunning) return;
    if (e.ok) {
      out.push_back(ArmTimer(AgentTimer::kHealth, config_.health_interval));
      return;
    }
    Stop stop;
    stop.report = ReportFailedCheck(e, "running", "; stopping the workers: this node leaves the job", out);
    StopGroup(SIGTERM, AgentPhase::kLeavingUnhealthy, std::move(stop), out);
    return;
  }
  if (phase_ != AgentPhase::kRendezvous) return;  // a signal ended the wait
  if (!e.ok) {
    LeaveUnhealthy(ReportFailedCheck(e, "rendezvous", "; this node does not join: it leaves the job", out), out);
    return;
  }
  out.push_back(Do(AgentAction::Kind::kNextRound));
}

// A failed check's one error line ("health check ... `next`", next starting
// with "; ") and node_unhealthy event (`during`: rendezvous or running);
// returns the report the node leaves with.
std::string AgentMachine::ReportFailedCheck(const AgentEvent& e, const char* during, const char* next,
                                            Actions& out) {
  out.push_back(Log(AgentAction::Level::kError, fmt::format("health check '{}' {}{}", e.command, e.text, next)));
  out.push_back(Emit("node_unhealthy", Json{{"source", "health_check"}, {"during", during},
                                            {"report", e.report}, {"last_lines", e.last_lines}}));
  return e.report;
}

void AgentMachine::OnExclusionRequest(const std::string& reason, Actions& out) {
  const std::string report = "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): " + reason;
  const bool running = state() == AgentState::kRunning;
  const bool restarting = phase_ == AgentPhase::kStoppingForRestart;
  if (!running && !restarting) return;  // finishing anyway (success or a signal)
  out.push_back(Log(AgentAction::Level::kError, report + "; stopping the workers: this node leaves the job"));
  out.push_back(Emit("node_unhealthy", Json{{"source", "exclusion_request"}, {"during", StateName(state())},
                                            {"report", report}, {"last_lines", Json::array({reason})}}));
  if (running) {
    Stop stop;
    stop.report = report;
    StopGroup(SIGTERM, AgentPhase::kLeavingUnhealthy, std::move(stop), out);
  } else {
    // A worker failed just before (or because of) its request: the stop
    // under way is the node's exclusion, not a restart.
    phase_ = AgentPhase::kLeavingUnhealthy;
    stop_.report = report;
  }
}

// The node leaves for good; the rendezvous counts it against
// --max-unhealthy-nodes and a spare (or the survivors) takes over.
void AgentMachine::LeaveUnhealthy(const std::string& report, Actions& out) {
  AgentAction block = Do(AgentAction::Kind::kPrintUnhealthy);
  block.text = report;
  out.push_back(block);
  AgentAction leave = Do(AgentAction::Kind::kSetUnhealthyReport);
  leave.text = report;
  out.push_back(leave);
  Finish(AgentPhase::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy, out);
}

// Finishes as failed with `code`: first the verdict (the peer's, or the
// run's as the shell resolves it from this node's last failure report),
// printed as the last line and carried by the Leave, then Finish.
void AgentMachine::FinishFailed(int code, ShutdownReason reason, Actions& out) {
  // Final from here: a signal changes nothing while the verdict is settled.
  phase_ = AgentPhase::kConcluding;
  exit_code_ = concluding_code_ = code;
  concluding_reason_ = reason;
  if (peer_verdict_) {
    Conclude(peer_verdict_, out);
    return;
  }
  out.push_back(Do(AgentAction::Kind::kResolveVerdict));
}

void AgentMachine::Conclude(std::optional<rdzv::VerdictSummary> verdict, Actions& out) {
  if (peer_verdict_) verdict = peer_verdict_;  // the node that closed the run said it first
  verdict_ = std::move(verdict);
  if (verdict_) {
    out.push_back(Log(AgentAction::Level::kError, Printable(verdict_->line)));
    if (concluding_reason_ == ShutdownReason::kFailed) {
      AgentAction a = Do(AgentAction::Kind::kSetFailureVerdict);
      a.verdict = verdict_;
      out.push_back(a);
    }
  }
  Finish(AgentPhase::kFailed, concluding_code_, concluding_reason_, out);
}

void AgentMachine::OnPeerFailed(const std::optional<rdzv::VerdictSummary>& verdict, Actions& out) {
  if (peer_failed_) return;
  peer_failed_ = true;
  peer_verdict_ = verdict;
  const std::string what = verdict ? ": " + Printable(verdict->line) : std::string();
  out.push_back(Emit("peer_failed", Json{{"verdict", verdict ? verdict->line : std::string()},
                                         {"state", StateName(state())},
                                         {"kill_on_bad_exit", config_.kill_on_bad_exit}}));
  if (!config_.kill_on_bad_exit) {
    out.push_back(Log(AgentAction::Level::kWarn,
                      "another node failed for good and closed the run" + what +
                          "; the workers run on (--kill-on-bad-exit 0)"));
    return;
  }
  switch (phase_) {
    case AgentPhase::kSaving:
      out.push_back(Log(AgentAction::Level::kInfo, "another node failed for good during the preemption save" +
                                                       what + "; the workers go on saving"));
      return;
    case AgentPhase::kLaunchWindow:
      // A worker failed in its first second: the group stops when that
      // second ends (at most 1 s away), so that a bad launch is told from
      // one rank's failure on this node too (StopForFailure).
      out.push_back(Log(AgentAction::Level::kError, "another node failed for good and closed the run" + what +
                                                        "; stopping the workers at the end of their first second"));
      return;
    case AgentPhase::kRunning:
      out.push_back(Log(AgentAction::Level::kError,
                        "another node failed for good and closed the run" + what + "; stopping the workers"));
      StopGroup(SIGTERM, AgentPhase::kStoppingForPeer, Stop{}, out,
                std::min<Duration>(config_.shutdown_grace, kPeerFailedGrace));
      return;
    case AgentPhase::kStoppingForRestart:
      // A restart under way would join a closed run: end with the peer's
      // failure instead. Other stops (a signal, an unhealthy leave, a
      // preemption, success) keep their end.
      out.push_back(Log(AgentAction::Level::kError,
                        "another node failed for good and closed the run" + what + "; not restarting"));
      phase_ = AgentPhase::kStoppingForPeer;
      return;
    case AgentPhase::kBackoff:
      out.push_back(CancelTimer(AgentTimer::kBackoff));
      out.push_back(Log(AgentAction::Level::kError,
                        "another node failed for good and closed the run" + what + "; not restarting"));
      FinishFailed(kExitFailure, ShutdownReason::kFailed, out);
      return;
    default:  // kRendezvous: the join is refused, and OnRoundFailed ends with this verdict
      return;
  }
}

}  // namespace ctrun::launcher
