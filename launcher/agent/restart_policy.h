// RestartPolicy: what follows the end of an attempt (one started worker
// group) that will be restarted — at once, after a delay (--restart-backoff),
// or not at all (--fail-fast-on-startup). Pure: the agent passes in what the
// attempt looked like; no clock, no I/O. The agent counts --max-restarts.
//
// - A crash (a worker failed, or missed its heartbeat) restarts after
//   backoff × 2^k, k = the crashes since the last healthy run, capped at
//   kBackoffCap × backoff. A run is healthy when it lasted at least
//   --min-healthy-uptime; a crash after one is delayed by `backoff` again.
// - With fail-fast on, a crash of the first attempt before any progress
//   stops the job: progress is a heartbeat touch where --heartbeat-timeout is
//   on, else an uptime of at least --min-healthy-uptime. Any earlier attempt
//   (even one a membership change ended) makes the next one not the first.
// - A membership change (a node lost or left, a peer's workers gone) is never
//   a crash: no delay, no fail-fast, the backoff is left as it was.
//
// Plain copyable state; deterministic.
#pragma once

#include "base/clock.h"

namespace ctrun::launcher {

struct RestartPolicyConfig {
  Duration backoff{};             // 0: restart at once
  Duration min_healthy_uptime{};  // resets the backoff; fail-fast's progress without heartbeat
  bool fail_fast_on_startup = false;
  bool heartbeat_on = false;      // --heartbeat-timeout is set
};

// One ended attempt.
struct AttemptEnd {
  bool membership_changed = false;  // ended by the membership, not by its own workers
  Duration uptime{};                // from its workers' start to the failure
  bool heartbeat_touched = false;   // any worker touched its heartbeat file
};

class RestartPolicy {
 public:
  // The longest delay, in multiples of the backoff: 32 × S (S, 2S ... 32S).
  static constexpr int kBackoffCap = 32;

  struct Decision {
    bool stop_at_startup = false;  // fail-fast: do not restart (exit "do not requeue")
    Duration delay{};              // before the next rendezvous
  };

  explicit RestartPolicy(RestartPolicyConfig config) : config_(config) {}

  // What to do after `attempt`; call once per ended attempt that the agent
  // would restart (budget permitting).
  Decision OnAttemptEnd(const AttemptEnd& attempt);

 private:
  RestartPolicyConfig config_;
  int attempts_ended_ = 0;
  int doublings_ = 0;  // crashes since the last healthy run, up to log2(kBackoffCap)
};

}  // namespace ctrun::launcher
