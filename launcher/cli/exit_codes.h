// ctrun's exit codes (docs/exit-codes.md): what every way out of ctrun,
// ctrun-full and `ctrun status` returns.
#pragma once

namespace ctrun::launcher {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;   // workers failed with no restarts left, or rendezvous failed
inline constexpr int kExitUsage = 2;     // bad flag, env value or script; nothing was started
inline constexpr int kExitDoNotRequeue = 3;  // --fail-fast-on-startup, or a failure no restart fixes (RestartPolicy)
inline constexpr int kExitWorkersStuck = 4;  // processes outlived SIGKILL by --kill-timeout: node unhealthy
inline constexpr int kExitNodeUnhealthy = 4;  // the same code: a failed health check or exclusion request
inline constexpr int kExitUnhealthyBudget = 5;  // more nodes left unhealthy than --max-unhealthy-nodes
// Preemption (--preempt-grace): sysexits' EX_TEMPFAIL, "try again later".
inline constexpr int kExitPreemptedSaved = 75;   // every worker saved the agreed step: requeue
inline constexpr int kExitPreemptMissed = 76;    // a notice came, but no save was confirmed in time: requeue
inline constexpr int kExitSignalBase = 128;  // 128 + N: stopped by signal N, workers stopped first

}  // namespace ctrun::launcher
