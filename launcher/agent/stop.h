// Stop: one stop of the agent's worker group under way — why it began; what
// comes after it is the AgentMachine's phase (agent_machine.h). Plain value;
// the machine holds at most one.
#pragma once

#include <string>
#include <vector>

#include "launcher/agent/restart_policy.h"

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
  StopCause cause = StopCause::kWorkerFailed;  // kStoppingForRestart: why
  std::string report;         // kLeavingUnhealthy: the report the node leaves with
  bool charged = true;        // kStoppingForRestart: counts against --max-restarts
  int signal = 0;             // kStoppingForSignal, kLeavingUnhealthy: the last signal received (0: none)
  bool group_closed = false;  // the WorkerGroup's Close has completed
  std::string stuck;          // the close gave up on processes (--kill-timeout): their report
  AttemptEnd attempt;         // the stopped group's run, for RestartPolicy

  static Stop ToRestart(StopCause cause, bool charged) {
    Stop s;
    s.cause = cause;
    s.charged = charged;
    s.attempt.membership_changed = cause == StopCause::kMembershipChanged;
    return s;
  }
};

}  // namespace ctrun::launcher
