// The verdict on a failed job (`ctrun status --why`, the status page): of
// the failures its nodes reported (failure_record.h), which one is the root
// cause and why each other one is a consequence of it.
//
// The root cause is the earliest failure by failure time that its agent did
// not stop itself (stopped_by_agent) and that is not a connection error: a
// connection error is the effect of a peer that went away, and is the root
// only when every failure is one. Among connection errors, one counts as
// kConnectionGraceS later than its time (that peer closes its sockets
// before it exits, so without an error file's timestamp its exit is seen
// after the connection error it caused). Ties go to the lowest rank. A
// node's record (rank -1: lost, or left as unhealthy; failure_record.h) is
// a cause like a worker's failure, never a connection error. Every other failure is a consequence, with a reason:
//   kStoppedByAgent   its agent stopped it (a restart, a peer's failure);
//   kConnectionError  its error message or last line is a lost connection
//                     (Gloo, NCCL, c10d, sockets: IsConnectionError);
//   kFailedAfter      anything else: it failed after the root cause.
// Failures its agents all stopped leave no root cause.
//
// Pure functions, plain data; formatting lives with the callers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/machine/failure_record.h"

namespace ctrun::rdzv {

// How much later than its time a connection error counts when the root
// cause is chosen (see above).
inline constexpr double kConnectionGraceS = 1.0;

enum class ConsequenceReason { kStoppedByAgent, kConnectionError, kFailedAfter };

// "stopped by its agent", "connection error", "failed after it".
std::string_view ReasonText(ConsequenceReason reason);

// True when `text` reads like a lost peer connection: Gloo's "Connection
// reset by peer" / "Connection closed by peer" / connectFullMesh, "Broken
// pipe", ECONNRESET / ECONNREFUSED, NCCL errors, c10d store or collective
// time-outs ("timed out", "Timeout"), "Socket Timeout" and the like.
// Case-insensitive.
bool IsConnectionError(std::string_view text);

struct Consequence {
  size_t index = 0;  // into the failures given
  ConsequenceReason reason = ConsequenceReason::kFailedAfter;
  double after_s = 0;  // its failure time minus the root cause's, never negative
};

struct FailureVerdict {
  std::optional<size_t> root;  // index into the failures; nullopt: none (no failures, or all stopped)
  std::vector<Consequence> consequences;  // every other failure, in the order given
};

// The verdict on `failures` (in any order).
FailureVerdict DecideVerdict(const std::vector<ReportedFailure>& failures);

// Consequences of one reason, together.
struct ConsequenceGroup {
  ConsequenceReason reason = ConsequenceReason::kFailedAfter;
  std::vector<int> ranks;  // sorted, without repeats (a node's record, rank -1, adds none)
  int nodes = 0;           // distinct reporting nodes
  double min_after_s = 0;
  double max_after_s = 0;
};

// The verdict's consequences grouped by reason (connection errors, then
// failed after it, then stopped by the agent); groups with none are left out.
std::vector<ConsequenceGroup> GroupConsequences(const FailureVerdict& verdict,
                                                const std::vector<ReportedFailure>& failures);

// Sorted ranks as runs: {0,1,2,3,5,7,8} -> "0-3, 5, 7-8"; "" for none.
std::string CompactRanks(const std::vector<int>& sorted_ranks);

}  // namespace ctrun::rdzv
