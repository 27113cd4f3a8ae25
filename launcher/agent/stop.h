// Stop: one stop of the agent's worker group under way — why it began and
// what comes after it (launcher/agent/agent.h's diagram, kStopping). Plain
// value; the agent holds at most one.
#pragma once

#include <string>
#include <vector>

#include "launcher/agent/restart_policy.h"
#include "launcher/process/worker_group.h"

namespace ctrun::launcher {

// Why a stop restarts the group: the `cause` of its "restart" and
// "startup_failed" events.
enum class StopCause {
  kWorkerFailed,       // a worker exited with a non-zero code or a signal
  kMembershipChanged,  // the rendezvous pushed a membership change
  kHeartbeatExpired,   // a worker missed its heartbeat (--heartbeat-timeout)
};

// The name written to the events file ("worker_failed", ...).
inline const char* Name(StopCause cause) {
  switch (cause) {
    case StopCause::kWorkerFailed: return "worker_failed";
    case StopCause::kMembershipChanged: return "membership_changed";
    case StopCause::kHeartbeatExpired: return "heartbeat_expired";
  }
  return "?";
}

struct Stop {
  enum class Then {
    kRestart,        // re-rendezvous and start a new group (budget permitting)
    kSucceed,        // every worker exited 0: finish with kExitSuccess
    kExitForSignal,  // finish with kExitSignalBase + signal
    kLeaveUnhealthy, // leave the job as unhealthy: finish with kExitNodeUnhealthy
    kPreempted,      // a preemption notice ended the group: finish with its verdict (75 or 76)
    kPeerFailed,     // another node failed for good (--kill-on-bad-exit): finish with kExitFailure
  };
  Then then = Then::kRestart;
  StopCause cause = StopCause::kWorkerFailed;  // kRestart: why
  std::string report;         // kLeaveUnhealthy: the report the node leaves with
  bool charged = true;        // kRestart: counts against --max-restarts
  int signal = 0;             // kExitForSignal, kLeaveUnhealthy: the last signal received (0: none)
  bool group_closed = false;  // the WorkerGroup's Close has completed
  AttemptEnd attempt;         // the stopped group's run, for RestartPolicy
  std::vector<StuckProcess> stuck;  // the close gave up on these (--kill-timeout)

  static Stop ToRestart(StopCause cause, bool charged) {
    Stop s;
    s.cause = cause;
    s.charged = charged;
    s.attempt.membership_changed = cause == StopCause::kMembershipChanged;
    return s;
  }
  static Stop ToSucceed() {
    Stop s;
    s.then = Then::kSucceed;
    return s;
  }
  static Stop ToLeaveUnhealthy(std::string report) {
    Stop s;
    s.then = Then::kLeaveUnhealthy;
    s.report = std::move(report);
    return s;
  }
  static Stop ToPreempted() {
    Stop s;
    s.then = Then::kPreempted;
    return s;
  }
  static Stop ToPeerFailed() {
    Stop s;
    s.then = Then::kPeerFailed;
    return s;
  }
  static Stop ToExitForSignal(int sig) {
    Stop s;
    s.then = Then::kExitForSignal;
    s.signal = sig;
    return s;
  }
};

}  // namespace ctrun::launcher
