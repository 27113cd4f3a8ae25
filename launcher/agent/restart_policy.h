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
//   a crash: no delay, no fail-fast, the backoff is left as it was; it also
//   ends a run of repeated failures (below).
// - A crash no restart can fix stops the job (Decision::unfixable says why),
//   unless --restart-on-any-failure: a bad launch (IsBadLaunch,
//   rendezvous/machine/failure_class.h), or the same error twice in a row:
//   the same rank, the same class of error text (not a lost connection or
//   NCCL: a peer's failure), the same message and traceback line, at the
//   same step (heartbeat touches since the attempt's start) where both
//   attempts' steps are known.
//
// Plain copyable state; deterministic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "rendezvous/machine/failure_class.h"
#include "rendezvous/machine/failure_record.h"

namespace ctrun::launcher {

struct RestartPolicyConfig {
  Duration backoff{};             // 0: restart at once
  Duration min_healthy_uptime{};  // resets the backoff; fail-fast's progress without heartbeat
  bool fail_fast_on_startup = false;
  bool heartbeat_on = false;      // --heartbeat-timeout is set
  bool restart_unfixable = false;  // --restart-on-any-failure
};

// The first failure of an attempt that was not a consequence (its agent did
// not stop it), for the same-error rule.
struct FailureSignature {
  int rank = 0;
  rdzv::FailureClass cls = rdzv::FailureClass::kUnknown;
  std::string error;      // the error file's message, else the last exception line of its stderr
  std::string last_line;  // its traceback's last line
  std::optional<uint64_t> steps;  // heartbeat touches since the attempt's start; nullopt unknown

  bool operator==(const FailureSignature&) const = default;
};

// One ended attempt.
struct AttemptEnd {
  bool membership_changed = false;  // ended by the membership, not by its own workers
  Duration uptime{};                // from its workers' start to the failure
  bool heartbeat_touched = false;   // any worker touched its heartbeat file
  bool bad_launch = false;          // its failures make a bad launch (IsBadLaunch)
  std::optional<FailureSignature> failure;  // its first failure not a consequence; nullopt none
};

// Fills `end`'s bad_launch and failure from an attempt's reported failures
// (`steps[i]`: the steps failures[i] finished, nullopt unknown; `ranks`: the
// attempt's local workers): IsBadLaunch over them, and the signature of the
// first failure DecideVerdict would call the root (none when every one was
// stopped by its agent).
void NoteAttemptFailures(const std::vector<rdzv::WorkerFailureInfo>& failures,
                         const std::vector<std::optional<uint64_t>>& steps, int ranks, AttemptEnd& end);

class RestartPolicy {
 public:
  // The longest delay, in multiples of the backoff: 32 × S (S, 2S ... 32S).
  static constexpr int kBackoffCap = 32;

  struct Decision {
    bool stop_at_startup = false;  // fail-fast: do not restart (exit "do not requeue")
    // Not empty: no restart can fix this failure; do not restart (exit "do
    // not requeue"). Why, in words, for the one line the agent prints.
    // stop_at_startup, when also set, wins (--fail-fast-on-startup asked).
    std::string unfixable;
    Duration delay{};              // before the next rendezvous
  };

  explicit RestartPolicy(RestartPolicyConfig config) : config_(config) {}

  // What to do after `attempt`; call once per ended attempt that the agent
  // would restart (budget permitting).
  Decision OnAttemptEnd(const AttemptEnd& attempt);

 private:
  RestartPolicyConfig config_;
  int attempts_ended_ = 0;
  std::optional<FailureSignature> last_failure_;  // the previous crash's, for the same-error rule
  int doublings_ = 0;  // crashes since the last healthy run, up to log2(kBackoffCap)
};

}  // namespace ctrun::launcher
