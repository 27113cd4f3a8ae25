// The verdict in one line: the root cause's class (failure_class.h) and
// what it failed after, as every place that tells why a job failed prints it
// (`ctrun status --why`, the status page, the agent's last console line, the
// `finished` event, a Closed run's message to its other nodes):
//
//   verdict: rank 5 on gpu-node-2 was killed by the kernel's OOM killer
//   (oom_kill 0->1 in its cgroup, peak RSS 23.1 GiB); 7 other ranks failed
//   after it (connection errors)
//
// The subject is "rank R on HOST" for a worker's failure and "node ADDR" for
// a node's record (rank -1: lost, or left as unhealthy). The tail counts the
// consequences (failure_verdict.h) by reason; with a single reason it names
// only the reason. With no root cause (every failure was one its agent
// stopped) the class is kStopped and the line says so.
//
// Pure functions, plain data.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "rendezvous/machine/failure_class.h"
#include "rendezvous/machine/failure_record.h"
#include "rendezvous/machine/failure_verdict.h"

namespace ctrun::rdzv {

struct VerdictSummary {
  FailureClass cls = FailureClass::kUnknown;  // the root's; kStopped with no root
  std::optional<int> rank;                    // the root's rank; nullopt for a node's record or no root
  std::string node;                           // the root's node (ToString(NodeId)); "" with no root
  std::string host;                           // the root's host name; "" with no root
  std::string evidence;                       // the class's text: "was killed by the kernel's OOM killer (...)"
  std::string line;                           // "verdict: ..." as above

  bool operator==(const VerdictSummary&) const = default;
};

// What a reported failure tells of its class.
FailureEvidence EvidenceOf(const WorkerFailureInfo& failure);

// The summary of `verdict` on `failures` (DecideVerdict's); nullopt when
// there were no failures.
std::optional<VerdictSummary> SummarizeVerdict(const FailureVerdict& verdict,
                                               const std::vector<ReportedFailure>& failures);

// The bounds of a verdict that travels between nodes (LeaveRequest,
// Closed): node and host <= 256 bytes, evidence <= 1024, line <= 2048.
inline constexpr size_t kMaxVerdictName = 256;
inline constexpr size_t kMaxVerdictEvidence = 1024;
inline constexpr size_t kMaxVerdictLine = 2048;

// OK when every text of `verdict` is within its bound and its rank is -1
// or more; else InvalidArgument with one line naming the field.
Status CheckVerdict(const VerdictSummary& verdict);

// DecideVerdict, then SummarizeVerdict.
std::optional<VerdictSummary> SummarizeFailures(const std::vector<ReportedFailure>& failures);

}  // namespace ctrun::rdzv
