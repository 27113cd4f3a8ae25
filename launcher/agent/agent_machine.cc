// AgentMachine's rounds, workers and restarts (agent_machine.h); the stop,
// signals, health and verdicts are in agent_machine_stop.cc, preemption in
// agent_machine_preempt.cc, the actions' builders in agent_actions.h.
#include "launcher/agent/agent_machine.h"

#include <signal.h>

#include <chrono>

#include "launcher/agent/agent_actions.h"
#include "launcher/cli/exit_codes.h"
#include "launcher/report/report.h"

namespace ctrun::launcher {

using namespace agent_actions;

namespace {

Json RoundFieldsOf(const Round& round) {
  return Json{{"round", round.round},
              {"group_rank", round.group_rank},
              {"nodes", round.local_world_sizes.size()},
              {"local_world_sizes", round.local_world_sizes},
              {"master_addr", round.master_addr},
              {"master_port", round.master_port},
              {"agent_store", round.use_agent_store}};
}

}  // namespace

const char* StateName(AgentState s) {
  switch (s) {
    case AgentState::kInit: return "init";
    case AgentState::kRendezvous: return "rendezvous";
    case AgentState::kRunning: return "running";
    case AgentState::kStopping: return "stopping";
    case AgentState::kBackoff: return "backoff";
    case AgentState::kSucceeded: return "succeeded";
    case AgentState::kFailed: return "failed";
  }
  return "?";
}

const char* PhaseName(AgentPhase p) {
  switch (p) {
    case AgentPhase::kInit: return "init";
    case AgentPhase::kRendezvous: return "rendezvous";
    case AgentPhase::kRunning: return "running";
    case AgentPhase::kLaunchWindow: return "launch_window";
    case AgentPhase::kSaving: return "saving";
    case AgentPhase::kStoppingForRestart: return "stopping_for_restart";
    case AgentPhase::kStoppingToSucceed: return "stopping_to_succeed";
    case AgentPhase::kStoppingForSignal: return "stopping_for_signal";
    case AgentPhase::kLeavingUnhealthy: return "leaving_unhealthy";
    case AgentPhase::kStoppingPreempted: return "stopping_preempted";
    case AgentPhase::kStoppingForPeer: return "stopping_for_peer";
    case AgentPhase::kBackoff: return "backoff";
    case AgentPhase::kConcluding: return "concluding";
    case AgentPhase::kSucceeded: return "succeeded";
    case AgentPhase::kFailed: return "failed";
  }
  return "?";
}

AgentState StateOf(AgentPhase p) {
  switch (p) {
    case AgentPhase::kInit: return AgentState::kInit;
    case AgentPhase::kRendezvous: return AgentState::kRendezvous;
    case AgentPhase::kRunning:
    case AgentPhase::kLaunchWindow:
    case AgentPhase::kSaving: return AgentState::kRunning;
    case AgentPhase::kStoppingForRestart:
    case AgentPhase::kStoppingToSucceed:
    case AgentPhase::kStoppingForSignal:
    case AgentPhase::kLeavingUnhealthy:
    case AgentPhase::kStoppingPreempted:
    case AgentPhase::kStoppingForPeer: return AgentState::kStopping;
    case AgentPhase::kBackoff: return AgentState::kBackoff;
    case AgentPhase::kSucceeded: return AgentState::kSucceeded;
    case AgentPhase::kConcluding:
    case AgentPhase::kFailed: return AgentState::kFailed;
  }
  return AgentState::kFailed;
}

AgentMachineConfig AgentMachineConfig::Of(const LaunchConfig& c, bool health_check, Duration launch_window) {
  AgentMachineConfig m;
  m.max_restarts = c.max_restarts;
  m.policy.backoff = ToDuration(c.restart_backoff);
  m.policy.min_healthy_uptime = ToDuration(c.min_healthy_uptime);
  m.policy.fail_fast_on_startup = c.fail_fast_on_startup;
  m.policy.heartbeat_on = c.heartbeat_timeout > Seconds(0);
  m.policy.restart_unfixable = c.restart_on_any_failure;
  m.shutdown_grace = ToDuration(c.shutdown_grace);
  m.backoff_on = c.restart_backoff > Seconds(0);
  m.heartbeat_on = c.heartbeat_timeout > Seconds(0);
  m.min_healthy_uptime_s = c.min_healthy_uptime.count();
  m.kill_on_bad_exit = c.kill_on_bad_exit;
  if (c.preempt_grace) m.preempt_grace_s = c.preempt_grace->count();
  m.preempt_signal = c.preempt_signal;
  m.slurm_job_end_unix_s = c.slurm_job_end_unix_s;
  m.health_check = health_check;
  m.health_interval = health_check ? ToDuration(c.health_check_interval) : Duration::zero();
  m.launch_window = launch_window;
  return m;
}

AgentMachine::AgentMachine(AgentMachineConfig config)
    : config_(config), policy_(config.policy), remaining_restarts_(config.max_restarts) {}

std::vector<AgentAction> AgentMachine::Step(const AgentEvent& e, const AgentNow& now) {
  now_ = now;
  Actions out;
  using K = AgentEvent::Kind;
  switch (e.kind) {
    case K::kStart: BeginRendezvous(out); break;
    case K::kAttemptPrepared: OnAttemptPrepared(e, out); break;
    case K::kHealthChecked: OnHealthChecked(e, out); break;
    case K::kRoundFailed: OnRoundFailed(e, out); break;
    case K::kRoundReady:
      if (phase_ != AgentPhase::kRendezvous) break;  // a signal ended the wait
      out.push_back(Emit("round_complete", RoundFieldsOf(e.round)));
      out.push_back(Do(AgentAction::Kind::kObserveRound));
      out.push_back(Do(AgentAction::Kind::kStartWorkers));
      break;
    case K::kWorkersStarted: OnWorkersStarted(e, out); break;
    case K::kWorkerExited: OnWorkerExited(e, out); break;
    case K::kMembershipChanged: OnMembershipChanged(e, out); break;
    case K::kHeartbeatMissed: OnHeartbeatMissed(e, out); break;
    case K::kSignal: OnSignal(e.signal, out); break;
    case K::kPeerPreempt: OnPeerPreempt(e.peer_notice, out); break;
    case K::kPeerFailed: OnPeerFailed(e.verdict, out); break;
    case K::kTimer: OnTimer(e.timer, out); break;
    case K::kExclusionRequest: OnExclusionRequest(e.text, out); break;
    case K::kGroupClosed:
      if (state() != AgentState::kStopping || stop_.group_closed) break;
      stop_.group_closed = true;
      stop_.stuck = e.report;
      out.push_back(Do(AgentAction::Kind::kEndWhenDrained));
      break;
    case K::kAttemptEnded: OnAttemptEnded(e, out); break;
    case K::kPreemptVerdictRead:
      if (phase_ != AgentPhase::kConcluding || preempt_verdict_) break;
      preempt_verdict_ = e.preempt_verdict;
      FinishPreemptedWith(out);
      break;
    case K::kVerdictResolved:
      if (phase_ == AgentPhase::kConcluding) Conclude(e.verdict, out);
      break;
  }
  return out;
}

void AgentMachine::BeginRendezvous(Actions& out) {
  phase_ = AgentPhase::kRendezvous;
  // The attempt's directories are made while the round forms: once it is
  // complete, every node starts its workers at once.
  AgentAction a = Do(AgentAction::Kind::kPrepareAttempt);
  a.restart_count = restart_count_;
  out.push_back(a);
}

void AgentMachine::OnAttemptPrepared(const AgentEvent& e, Actions& out) {
  if (phase_ != AgentPhase::kRendezvous) return;
  if (!e.ok) {
    out.push_back(Log(AgentAction::Level::kError, e.text));
    Finish(AgentPhase::kFailed, kExitFailure, ShutdownReason::kFailed, out);
    return;
  }
  // The last group is gone: its keys and connections must not leak into the
  // next one (after a scale-up the attempt prefix is even the same).
  out.push_back(Do(AgentAction::Kind::kClearStore));
  out.push_back(Emit("rendezvous_started", Json{{"restart_count", restart_count_}}));
  // Before every join: a broken node must not take a place in the round.
  out.push_back(Do(config_.health_check ? AgentAction::Kind::kRunHealthCheck : AgentAction::Kind::kNextRound));
}

void AgentMachine::OnRoundFailed(const AgentEvent& e, Actions& out) {
  if (phase_ != AgentPhase::kRendezvous) return;  // a signal ended the wait
  if (e.budget) {
    out.push_back(Log(AgentAction::Level::kError,
                      fmt::format("the job ends: {} (exit code {})", e.text, kExitUnhealthyBudget)));
  } else {
    out.push_back(Log(AgentAction::Level::kError, "rendezvous failed: " + e.text));
  }
  out.push_back(Emit(e.budget ? "unhealthy_budget_exceeded" : "rendezvous_failed", Json{{"error", e.text}}));
  if (peer_failed_) {  // the run was closed by a node that failed for good: its verdict
    FinishFailed(kExitFailure, ShutdownReason::kFailed, out);
    return;
  }
  Finish(AgentPhase::kFailed, e.budget ? kExitUnhealthyBudget : kExitFailure, ShutdownReason::kFailed, out);
}

void AgentMachine::OnWorkersStarted(const AgentEvent& e, Actions& out) {
  if (phase_ != AgentPhase::kRendezvous) return;
  ended_with_failures_ = false;
  if (!e.ok) {
    out.push_back(Log(AgentAction::Level::kError, "cannot start workers: " + e.text));
    AgentAction a = Do(AgentAction::Kind::kReportExecFailure);
    a.text = e.text;
    out.push_back(a);
    FinishFailed(kExitFailure, ShutdownReason::kFailed, out);
    return;
  }
  phase_ = AgentPhase::kRunning;
  attempt_live_ = true;
  workers_ = running_ = e.workers;
  started_ = now_.steady;
  hung_local_rank_.reset();
  stop_ = Stop{};
  out.push_back(Do(AgentAction::Kind::kWatchWorkers));
  if (config_.health_interval > Duration::zero()) out.push_back(ArmTimer(AgentTimer::kHealth, config_.health_interval));
}

void AgentMachine::OnWorkerExited(const AgentEvent& e, Actions& out) {
  if (!attempt_live_) return;  // its attempt has ended: nothing of it is left to update
  --running_;
  Json f{{"local_rank", e.local_rank}, {"rank", e.rank}, {"pid", e.pid}};
  if (e.exit_code < 0) f["signal"] = SignalName(-e.exit_code);
  else f["exit_code"] = e.exit_code;
  f["during"] = StateName(state());
  out.push_back(Emit("worker_exited", f));
  const bool failed = e.exit_code != 0;
  if (failed && phase_ != AgentPhase::kStoppingForSignal) {
    AgentAction a = Do(AgentAction::Kind::kRecordFailure);
    a.local_rank = e.local_rank;
    // Exited while the agent stopped the group: stopped by it, unless it
    // hung (a cause, not a consequence).
    a.flag = state() == AgentState::kStopping;
    a.hung = hung_local_rank_ == e.local_rank;
    a.seconds = SecondsOf(now_.steady - started_);
    out.push_back(a);
  }
  if (state() != AgentState::kRunning) return;
  if (phase_ == AgentPhase::kSaving) {
    PreemptWorkerExited(e, out);
    return;
  }
  if (failed) {
    const bool wait = WaitOutLaunchWindow(out);
    out.push_back(Log(AgentAction::Level::kWarn,
                      fmt::format("worker local_rank {} (pid {}) exited with {}; stopping the worker group{}",
                                  e.local_rank, e.pid,
                                  e.exit_code < 0 ? SignalName(-e.exit_code) : std::to_string(e.exit_code),
                                  wait ? " at the end of its first second (to tell a bad launch from one "
                                         "rank's failure)"
                                       : "")));
    if (!wait) StopForFailure(out);
  } else if (running_ == 0) {
    if (phase_ == AgentPhase::kLaunchWindow) {
      StopForFailure(out);
    } else {
      StopGroup(SIGTERM, AgentPhase::kStoppingToSucceed, Stop{}, out);
    }
  }
}

// A worker failed within the launch window (kBadLaunchWindowS): the others
// run to the window's end, or to their own end, before the group is
// stopped, so that a bad launch (every rank failing the same way:
// IsBadLaunch) is told from one rank's failure. Returns whether the stop
// waits.
bool AgentMachine::WaitOutLaunchWindow(Actions& out) {
  const Duration since = now_.steady - started_;
  if (running_ == 0 || since >= config_.launch_window) return false;
  if (phase_ != AgentPhase::kLaunchWindow) {
    phase_ = AgentPhase::kLaunchWindow;
    out.push_back(ArmTimer(AgentTimer::kLaunchWindow, config_.launch_window - since));
  }
  return true;
}

// The stop a worker's failure begins: a restart, or, once another node
// failed for good (--kill-on-bad-exit), the end with its verdict.
void AgentMachine::StopForFailure(Actions& out, std::optional<Duration> grace) {
  if (peer_failed_ && config_.kill_on_bad_exit) {
    StopGroup(SIGTERM, AgentPhase::kStoppingForPeer, Stop{}, out, grace);
    return;
  }
  StopGroup(SIGTERM, AgentPhase::kStoppingForRestart, Stop::ToRestart(StopCause::kWorkerFailed, true), out, grace);
}

void AgentMachine::OnMembershipChanged(const AgentEvent& e, Actions& out) {
  out.push_back(Emit("membership_changed", Json{{"why", e.text}, {"charged", e.charged}, {"state", StateName(state())}}));
  if (preempt_) {
    // The nodes that saved leave the run: no restart now. A peer lost
    // mid-save leaves this node's workers to the deadline.
    out.push_back(Log(AgentAction::Level::kInfo, e.text + " during the preemption save; the workers go on saving"));
    return;
  }
  if (phase_ == AgentPhase::kStoppingForRestart && stop_.charged && !e.charged) {
    // A peer's death usually breaks the collective, and so fails a worker,
    // just before its push arrives: the restart under way is the
    // membership's, and is not charged either.
    out.push_back(Log(AgentAction::Level::kWarn, e.text + "; restarting the worker group (not charged to --max-restarts)"));
    stop_.charged = false;
    stop_.cause = StopCause::kMembershipChanged;
    stop_.attempt.membership_changed = true;
    return;
  }
  if (state() != AgentState::kRunning) return;
  out.push_back(Log(AgentAction::Level::kWarn, fmt::format("{}; restarting the worker group{}", e.text,
                                                           e.charged ? "" : " (not charged to --max-restarts)")));
  StopGroup(SIGTERM, AgentPhase::kStoppingForRestart, Stop::ToRestart(StopCause::kMembershipChanged, e.charged), out);
}

// A hung worker is a failed worker: SIGTERM lets the healthy ones exit
// cleanly, the shutdown grace then SIGKILLs one that is stuck for good.
void AgentMachine::OnHeartbeatMissed(const AgentEvent& e, Actions& out) {
  if (state() != AgentState::kRunning) return;
  out.push_back(Log(AgentAction::Level::kWarn,
                    fmt::format("worker local_rank {} (pid {}) missed its heartbeat for {:.1f} s{}; killing the "
                                "worker group",
                                e.local_rank, e.pid, e.silent_for_s,
                                e.ever_touched ? "" : " (never touched CTRUN_HEARTBEAT_FILE since its start)")));
  out.push_back(Emit("heartbeat_expired",
                     Json{{"local_rank", e.local_rank}, {"pid", e.pid}, {"silent_for_s", e.silent_for_s}}));
  hung_local_rank_ = e.local_rank;
  AgentAction stacks = Do(AgentAction::Kind::kSaveStacks);
  stacks.local_rank = e.local_rank;
  stacks.text = "its heartbeat expired";
  out.push_back(stacks);
  StopGroup(SIGTERM, AgentPhase::kStoppingForRestart, Stop::ToRestart(StopCause::kHeartbeatExpired, true), out);
}

void AgentMachine::OnTimer(AgentTimer timer, Actions& out) {
  switch (timer) {
    case AgentTimer::kBackoff:
      if (phase_ == AgentPhase::kBackoff) BeginRendezvous(out);
      return;
    case AgentTimer::kLaunchWindow:
      if (phase_ == AgentPhase::kLaunchWindow) StopForFailure(out);
      return;
    case AgentTimer::kPreemptDeadline:
      if (phase_ != AgentPhase::kSaving) return;
      MissPreempt(fmt::format("the deadline ({:.1f} s) passed with {} of {} workers still running",
                              preempt_->budget_s, running_, workers_));
      StopGroup(SIGTERM, AgentPhase::kStoppingPreempted, Stop{}, out);
      return;
    case AgentTimer::kPreemptWaiting: {
      if (phase_ != AgentPhase::kSaving || preempt_verdict_) return;
      AgentAction a = Do(AgentAction::Kind::kLogPreemptWaiting);
      a.workers = workers_;
      a.running = running_;
      a.seconds = SecondsOf(preempt_deadline_ - now_.steady);
      out.push_back(a);
      out.push_back(ArmTimer(AgentTimer::kPreemptWaiting, kPreemptWaitingEvery));
      return;
    }
    case AgentTimer::kHealth:
      if (state() != AgentState::kRunning) return;
      out.push_back(Do(AgentAction::Kind::kRunHealthCheck));
      out.back().flag = true;  // periodic
      return;
  }
}

void AgentMachine::OnAttemptEnded(const AgentEvent& e, Actions& out) {
  if (!attempt_live_ || state() != AgentState::kStopping || !stop_.group_closed) return;
  attempt_live_ = false;
  ended_with_failures_ = e.failures;
  report_code_ = e.report_code;
  stop_.attempt.heartbeat_touched = e.notes.heartbeat_touched;
  stop_.attempt.bad_launch = e.notes.bad_launch;
  stop_.attempt.failure = e.notes.failure;
  if (!stop_.stuck.empty()) {
    out.push_back(Do(AgentAction::Kind::kReportStuck));
    AgentAction a = Do(AgentAction::Kind::kSetUnhealthyReport);
    a.text = stop_.stuck;
    out.push_back(a);
    Finish(AgentPhase::kFailed, kExitWorkersStuck, ShutdownReason::kUnhealthy, out);
    return;
  }
  switch (phase_) {
    case AgentPhase::kStoppingForRestart: Restart(out); return;
    case AgentPhase::kStoppingToSucceed: Finish(AgentPhase::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded, out); return;
    case AgentPhase::kStoppingForSignal:
      Finish(AgentPhase::kFailed, kExitSignalBase + stop_.signal, ShutdownReason::kSignal, out);
      return;
    case AgentPhase::kLeavingUnhealthy: LeaveUnhealthy(stop_.report, out); return;
    case AgentPhase::kStoppingPreempted: FinishPreempted(true, out); return;
    case AgentPhase::kStoppingForPeer: FinishFailed(kExitFailure, ShutdownReason::kFailed, out); return;
    default: return;
  }
}

void AgentMachine::Restart(Actions& out) {
  if (preempt_) {  // no restart during a notice: the job is being stopped
    MissPreempt(fmt::format("the workers were stopped for a restart ({})", Name(stop_.cause)));
    FinishPreempted(true, out);
    return;
  }
  const RestartPolicy::Decision next = policy_.OnAttemptEnd(stop_.attempt);
  if (!stop_.charged) {
    out.push_back(Emit("restart", Json{{"cause", Name(stop_.cause)}, {"charged", false},
                                       {"restart_count", restart_count_}, {"remaining_restarts", remaining_restarts_}}));
    BeginRendezvous(out);
    return;
  }
  if (next.stop_at_startup) {
    // The first attempt crashed before any progress: the script, its imports
    // or its environment are broken, and every restart would fail the same way.
    out.push_back(Log(AgentAction::Level::kError,
                      fmt::format("the first attempt failed at start-up ({} after {:.1f} s, {}); not restarting it "
                                  "(--fail-fast-on-startup), exit code {} (do not requeue)",
                                  stop_.cause == StopCause::kHeartbeatExpired ? "a worker missed its first heartbeat"
                                                                              : "a worker failed",
                                  SecondsOf(stop_.attempt.uptime),
                                  config_.heartbeat_on ? std::string("no worker touched CTRUN_HEARTBEAT_FILE")
                                                       : fmt::format("under --min-healthy-uptime {:.0f} s",
                                                                     config_.min_healthy_uptime_s),
                                  kExitDoNotRequeue)));
    out.push_back(Emit("startup_failed", Json{{"cause", Name(stop_.cause)},
                                              {"uptime_s", SecondsOf(stop_.attempt.uptime)},
                                              {"heartbeat_touched", stop_.attempt.heartbeat_touched},
                                              {"remaining_restarts", remaining_restarts_}}));
    ReportFailure(kExitDoNotRequeue, out);
    return;
  }
  if (!next.unfixable.empty() && remaining_restarts_ > 0) {
    // A failure no restart can fix (a bad launch, the same error twice in a
    // row): restarting would only repeat it.
    out.push_back(Log(AgentAction::Level::kError,
                      fmt::format("not restarting: {}; exit code {} (do not requeue; --restart-on-any-failure "
                                  "restarts anyway)",
                                  next.unfixable, kExitDoNotRequeue)));
    out.push_back(Emit("restart_refused", Json{{"cause", Name(stop_.cause)},
                                               {"why", next.unfixable},
                                               {"bad_launch", stop_.attempt.bad_launch},
                                               {"remaining_restarts", remaining_restarts_}}));
    ReportFailure(kExitDoNotRequeue, out);
    return;
  }
  if (remaining_restarts_ <= 0) {
    ReportFailure(std::nullopt, out);
    return;
  }
  --remaining_restarts_;
  ++restart_count_;
  if (next.delay > Duration::zero()) {
    out.push_back(Log(AgentAction::Level::kWarn,
                      fmt::format("restarting the worker group in {:.1f} s (restart {} of {}; --restart-backoff)",
                                  SecondsOf(next.delay), restart_count_, config_.max_restarts)));
  } else {
    out.push_back(Log(AgentAction::Level::kWarn, fmt::format("restarting the worker group (restart {} of {})",
                                                             restart_count_, config_.max_restarts)));
  }
  Json f{{"cause", Name(stop_.cause)}, {"charged", true}, {"restart_count", restart_count_},
         {"remaining_restarts", remaining_restarts_}};
  if (config_.backoff_on) f["delay_s"] = SecondsOf(next.delay);
  out.push_back(Emit("restart", f));
  if (next.delay > Duration::zero()) {
    phase_ = AgentPhase::kBackoff;
    out.push_back(ArmTimer(AgentTimer::kBackoff, next.delay));
  } else {
    BeginRendezvous(out);
  }
}

// Prints the failure report of the ended attempt and finishes with `forced`,
// or with its report's code (1, or the root cause's own with
// --exit-code-from-root-cause).
void AgentMachine::ReportFailure(std::optional<int> forced, Actions& out) {
  AgentAction a = Do(AgentAction::Kind::kPrintFailureReport);
  a.code = forced;
  out.push_back(a);
  FinishFailed(forced.value_or(report_code_), ShutdownReason::kFailed, out);
}

void AgentMachine::Finish(AgentPhase final_phase, int code, ShutdownReason reason, Actions& out) {
  phase_ = final_phase;
  exit_code_ = code;
  Json f{{"state", StateName(state())}, {"exit_code", code}, {"restart_count", restart_count_}};
  if (verdict_) {
    f["cause_class"] = std::string(rdzv::FailureClassName(verdict_->cls));
    f["cause_rank"] = verdict_->rank ? Json(*verdict_->rank) : Json(nullptr);
    f["cause_node"] = verdict_->node;
    f["cause_host"] = verdict_->host;
    f["evidence"] = verdict_->evidence;
    f["verdict"] = verdict_->line;
  }
  out.push_back(Emit("finished", f));
  AgentAction a = Do(AgentAction::Kind::kFinish);
  a.reason = reason;
  a.flag = code == kExitSuccess;
  out.push_back(a);
}

}  // namespace ctrun::launcher
