#include "rendezvous/machine/failure_verdict.h"

#include <algorithm>
#include <set>

#include "base/text_match.h"

namespace ctrun::rdzv {

namespace {

// Lower-case fragments of the texts Gloo, NCCL, c10d and sockets fail with
// when a peer goes away.
constexpr std::string_view kConnectionTexts[] = {
    "connection reset",    "connection closed by peer", "connection refused", "broken pipe",
    "connectfullmesh",     "econnreset",                "econnrefused",       "epipe",
    "nccl error",          "ncclremoteerror",           "ncclsystemerror",    "timed out",
    "timeout",             "socket closed",             "connection aborted", "peer closed",
    "remote process exited",
    "unhandled system error", "transport endpoint is not connected",
};

bool ConnectionFailure(const WorkerFailureInfo& f) {
  if (f.rank < 0) return false;  // a node's record: lost or unhealthy, a cause
  return IsConnectionError(f.error_message) || IsConnectionError(f.last_line);
}

// Whether failure a is the better root cause than b (both not stopped).
bool BetterRoot(const WorkerFailureInfo& a, const WorkerFailureInfo& b) {
  const bool ca = ConnectionFailure(a), cb = ConnectionFailure(b);
  if (ca != cb) return !ca;  // a connection error is never the root while another cause exists
  const double at = a.failed_at_unix_s + (ca ? kConnectionGraceS : 0);
  const double bt = b.failed_at_unix_s + (cb ? kConnectionGraceS : 0);
  if (at != bt) return at < bt;
  if (ca != cb) return !ca;
  return a.rank < b.rank;
}

}  // namespace

std::string_view ReasonText(ConsequenceReason reason) {
  switch (reason) {
    case ConsequenceReason::kStoppedByAgent: return "stopped by its agent";
    case ConsequenceReason::kConnectionError: return "connection error";
    case ConsequenceReason::kFailedAfter: return "failed after it";
  }
  return "failed after it";
}

bool IsConnectionError(std::string_view text) {
  for (std::string_view needle : kConnectionTexts) {
    if (ContainsFolded(text, needle)) return true;
  }
  return false;
}

FailureVerdict DecideVerdict(const std::vector<ReportedFailure>& failures) {
  FailureVerdict v;
  for (size_t i = 0; i < failures.size(); ++i) {
    const WorkerFailureInfo& f = failures[i].failure;
    if (f.stopped_by_agent) continue;
    if (!v.root || BetterRoot(f, failures[*v.root].failure)) v.root = i;
  }
  const double root_at = v.root ? failures[*v.root].failure.failed_at_unix_s : 0;
  for (size_t i = 0; i < failures.size(); ++i) {
    if (v.root && i == *v.root) continue;
    const WorkerFailureInfo& f = failures[i].failure;
    Consequence c;
    c.index = i;
    c.reason = f.stopped_by_agent       ? ConsequenceReason::kStoppedByAgent
               : ConnectionFailure(f)   ? ConsequenceReason::kConnectionError
                                        : ConsequenceReason::kFailedAfter;
    c.after_s = v.root ? std::max(0.0, f.failed_at_unix_s - root_at) : 0;
    v.consequences.push_back(c);
  }
  return v;
}

std::vector<ConsequenceGroup> GroupConsequences(const FailureVerdict& verdict,
                                                const std::vector<ReportedFailure>& failures) {
  std::vector<ConsequenceGroup> groups;
  for (ConsequenceReason reason : {ConsequenceReason::kConnectionError, ConsequenceReason::kFailedAfter,
                                   ConsequenceReason::kStoppedByAgent}) {
    ConsequenceGroup g;
    g.reason = reason;
    std::set<int> ranks;
    std::vector<const NodeId*> nodes;
    bool any = false;
    for (const Consequence& c : verdict.consequences) {
      if (c.reason != reason || c.index >= failures.size()) continue;
      const ReportedFailure& f = failures[c.index];
      if (f.failure.rank >= 0) ranks.insert(f.failure.rank);  // a node's record names no rank
      if (std::none_of(nodes.begin(), nodes.end(), [&](const NodeId* n) { return *n == f.node; })) {
        nodes.push_back(&f.node);
      }
      g.min_after_s = any ? std::min(g.min_after_s, c.after_s) : c.after_s;
      g.max_after_s = any ? std::max(g.max_after_s, c.after_s) : c.after_s;
      any = true;
    }
    if (!any) continue;
    g.ranks.assign(ranks.begin(), ranks.end());
    g.nodes = static_cast<int>(nodes.size());
    groups.push_back(std::move(g));
  }
  return groups;
}

std::string CompactRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace ctrun::rdzv
