#include "rendezvous/machine/verdict_line.h"

#include <string_view>

#include "rendezvous/machine/node_order.h"

namespace ctrun::rdzv {

namespace {

// A consequence reason's words, singular or plural.
std::string ReasonWords(ConsequenceReason reason, bool many) {
  switch (reason) {
    case ConsequenceReason::kConnectionError: return many ? "connection errors" : "connection error";
    case ConsequenceReason::kStoppedByAgent: return many ? "stopped by their agents" : "stopped by its agent";
    case ConsequenceReason::kFailedAfter: return many ? "other errors" : "other error";
  }
  return "";
}

// "; 7 other ranks failed after it (connection errors)", "; 3 other ranks
// failed after it (2 connection errors, 1 stopped by its agent)"; "" for none.
std::string Tail(const FailureVerdict& verdict, const std::vector<ReportedFailure>& failures) {
  const size_t n = verdict.consequences.size();
  if (n == 0) return "";
  bool all_workers = true;
  size_t counts[3] = {0, 0, 0};
  for (const Consequence& c : verdict.consequences) {
    if (c.index < failures.size() && failures[c.index].failure.rank < 0) all_workers = false;
    ++counts[static_cast<size_t>(c.reason)];
  }
  std::string parts;
  size_t kinds = 0;
  for (size_t count : counts) kinds += count > 0 ? 1 : 0;
  for (ConsequenceReason r : {ConsequenceReason::kConnectionError, ConsequenceReason::kFailedAfter,
                              ConsequenceReason::kStoppedByAgent}) {
    const size_t count = counts[static_cast<size_t>(r)];
    if (count == 0) continue;
    if (!parts.empty()) parts += ", ";
    parts += kinds == 1 ? ReasonWords(r, count > 1) : std::to_string(count) + " " + ReasonWords(r, count > 1);
  }
  const std::string noun = all_workers ? (n == 1 ? "rank" : "ranks") : (n == 1 ? "failure" : "failures");
  const std::string what = verdict.root ? " other " + noun + " failed after it" : " " + noun + " failed";
  return "; " + std::to_string(n) + what + " (" + parts + ")";
}

}  // namespace

FailureEvidence EvidenceOf(const WorkerFailureInfo& f) {
  FailureEvidence e;
  e.exit_code = f.exit_code;
  e.signal = f.signal;
  if (f.oom_kills_before >= 0) e.oom_kills_before = f.oom_kills_before;
  if (f.oom_kills_after >= 0) e.oom_kills_after = f.oom_kills_after;
  e.error_message = f.unhealthy ? "" : f.error_message;
  e.last_line = f.last_line;
  e.node_lost = f.node_lost;
  e.unhealthy = f.unhealthy;
  if (f.unhealthy) e.health_reason = f.error_message;
  e.hung = f.hung;
  e.hang_frame = f.hang_frame;
  e.stopped_by_agent = f.stopped_by_agent;
  e.exec_failed = f.exec_failed;
  e.bad_launch = f.bad_launch;
  e.runtime_s = f.runtime_s;
  e.max_rss_kib = f.max_rss_kib;
  return e;
}

std::optional<VerdictSummary> SummarizeVerdict(const FailureVerdict& verdict,
                                               const std::vector<ReportedFailure>& failures) {
  if (failures.empty()) return std::nullopt;
  VerdictSummary s;
  if (!verdict.root || *verdict.root >= failures.size()) {
    s.cls = FailureClass::kStopped;
    s.evidence = "no worker failed on its own: every failure reported was a worker its agent stopped";
    s.line = "verdict: " + s.evidence + Tail(verdict, failures);
    return s;
  }
  const ReportedFailure& root = failures[*verdict.root];
  const FailureCause cause = ClassifyFailure(EvidenceOf(root.failure));
  s.cls = cause.cls;
  s.evidence = cause.text;
  s.node = ToString(root.node);
  s.host = root.host.empty() ? root.node.addr : root.host;
  std::string subject;
  if (root.failure.rank >= 0) {
    s.rank = root.failure.rank;
    subject = "rank " + std::to_string(root.failure.rank) + " on " + s.host;
  } else {
    subject = "node " + (root.node.addr.empty() ? s.host : root.node.addr);
  }
  s.line = "verdict: " + subject + " " + cause.text + Tail(verdict, failures);
  return s;
}

Status CheckVerdict(const VerdictSummary& v) {
  const auto too_long = [](std::string_view field, size_t size, size_t bound) {
    return Status::InvalidArgument("verdict: " + std::string(field) + " is " + std::to_string(size) +
                                   " bytes, more than " + std::to_string(bound) + ": send it cut");
  };
  if (v.node.size() > kMaxVerdictName) return too_long("cause_node", v.node.size(), kMaxVerdictName);
  if (v.host.size() > kMaxVerdictName) return too_long("cause_host", v.host.size(), kMaxVerdictName);
  if (v.evidence.size() > kMaxVerdictEvidence) return too_long("evidence", v.evidence.size(), kMaxVerdictEvidence);
  if (v.line.size() > kMaxVerdictLine) return too_long("line", v.line.size(), kMaxVerdictLine);
  if (v.rank && *v.rank < 0) {
    return Status::InvalidArgument("verdict: cause_rank " + std::to_string(*v.rank) +
                                   " is negative: send -1 for none");
  }
  return Status::Ok();
}

std::optional<VerdictSummary> SummarizeFailures(const std::vector<ReportedFailure>& failures) {
  return SummarizeVerdict(DecideVerdict(failures), failures);
}

}  // namespace ctrun::rdzv
