#include "launcher/agent/restart_policy.h"

namespace ctrun::launcher {

RestartPolicy::Decision RestartPolicy::OnAttemptEnd(const AttemptEnd& attempt) {
  const bool first = attempts_ended_ == 0;
  ++attempts_ended_;
  Decision d;
  if (attempt.membership_changed) return d;
  const bool healthy = attempt.uptime >= config_.min_healthy_uptime;
  const bool progress = config_.heartbeat_on ? attempt.heartbeat_touched : healthy;
  if (config_.fail_fast_on_startup && first && !progress) {
    d.stop_at_startup = true;
    return d;
  }
  if (healthy) doublings_ = 0;
  d.delay = config_.backoff * (1 << doublings_);
  if ((1 << doublings_) < kBackoffCap) ++doublings_;
  return d;
}

}  // namespace ctrun::launcher
