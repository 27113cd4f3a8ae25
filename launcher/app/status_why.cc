#include "launcher/app/status_why.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <ctime>
#include <string_view>

#include "base/text_match.h"
#include "launcher/report/report.h"
#include "rendezvous/machine/failure_verdict.h"
#include "rendezvous/machine/node_order.h"
#include "rendezvous/machine/verdict_line.h"

namespace ctrun::launcher {

namespace {

// "2026-11-28 02:40:01.234 UTC"; "an unknown time" for 0.
std::string UtcTime(double unix_s) {
  if (!(unix_s > 0)) return "an unknown time";
  const long long ms = std::llround(unix_s * 1000);
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("{}.{:03d} UTC", text, ms % 1000);
}

// "connection error after 0.4 s", "failed 2.0-5.0 s after it"; without a
// root cause only the reason.
std::string GroupReason(const rdzv::ConsequenceGroup& g, bool root) {
  if (!root) return std::string(rdzv::ReasonText(g.reason));
  const std::string span = std::fabs(g.max_after_s - g.min_after_s) < 0.05
                               ? fmt::format("{:.1f} s", g.min_after_s)
                               : fmt::format("{:.1f}-{:.1f} s", g.min_after_s, g.max_after_s);
  if (g.reason == rdzv::ConsequenceReason::kFailedAfter) return "failed " + span + " after it";
  return fmt::format("{} after {}", rdzv::ReasonText(g.reason), span);
}

// The fix for a worker that wrote no error file.
constexpr std::string_view kRecordFix =
    "decorate its main with @record (from torch.distributed.elastic.multiprocessing.errors import record) "
    "for its error file";

}  // namespace

std::string DescribeFailure(const rdzv::ReportedFailure& r) {
  const rdzv::WorkerFailureInfo& f = r.failure;
  // The node as the status table and the page show it (its --local-addr,
  // else its host name, then '#' and its agent's pid: two nodes on one host
  // differ), and its host name too when that says more.
  std::string host = r.node.addr.empty() ? Printable(r.host) : Printable(rdzv::ToString(r.node));
  if (!r.host.empty() && !r.node.addr.empty() && r.host != r.node.addr) host += " (" + Printable(r.host) + ")";
  if (f.rank < 0) {
    return fmt::format("node {} {} at {}", host, f.node_lost ? "was lost" : "left the job as unhealthy",
                       UtcTime(f.failed_at_unix_s));
  }
  const std::string end =
      f.signal != 0 ? "was killed by " + SignalName(f.signal) : "exited with " + std::to_string(f.exit_code);
  return fmt::format("rank {} (node {}, local rank {}) {} at {}", f.rank, host, f.local_rank, end,
                     UtcTime(f.failed_at_unix_s));
}

std::string FormatWhy(const rdzv::RunView& view) {
  if (view.failures.empty()) return "no failure reported\n";
  const rdzv::FailureVerdict verdict = rdzv::DecideVerdict(view.failures);
  std::string out;
  if (const std::optional<rdzv::VerdictSummary> summary = rdzv::SummarizeVerdict(verdict, view.failures)) {
    out += Printable(summary->line) + "\n";
  }
  if (verdict.root) {
    const rdzv::ReportedFailure& root = view.failures[*verdict.root];
    const rdzv::WorkerFailureInfo& f = root.failure;
    out += "root cause: " + DescribeFailure(root) +
           (f.error_message.empty() ? "" : ": " + Printable(f.error_message)) + "\n";
    if (!f.last_line.empty()) out += "  last line: " + Printable(f.last_line) + "\n";
    if (!f.error_file.empty()) out += "  error file: " + Printable(f.error_file) + "\n";
    if (!f.stacks_file.empty()) out += "  stacks: " + Printable(f.stacks_file) + "\n";
    // No error file (a script without @record): say where the text came
    // from, or that there is none, and the fix, once.
    if (f.error_file.empty() && f.signal == 0 && f.rank >= 0) {
      out += f.from_stderr ? "  no error file: the lines above are from its stderr; " + std::string(kRecordFix) + "\n"
                           : "  no error file and no stderr kept: " + std::string(kRecordFix) +
                                 ", or run ctrun with --tee 3\n";
    }
  } else {
    out += "no root cause: every worker reported was stopped by its agent\n";
  }
  const size_t others = verdict.consequences.size();
  if (others == 0) {
    out += "consequences: none\n";
  } else {
    out += fmt::format("consequences: {} {}failed worker{}\n", others, verdict.root ? "other " : "",
                       others == 1 ? "" : "s");
    for (const rdzv::ConsequenceGroup& g : rdzv::GroupConsequences(verdict, view.failures)) {
      out += fmt::format("  rank{} {} on {} node{}: {}\n", g.ranks.size() == 1 ? "" : "s",
                         rdzv::CompactRanks(g.ranks), g.nodes, g.nodes == 1 ? "" : "s",
                         GroupReason(g, verdict.root.has_value()));
    }
  }
  if (view.failures_seen > static_cast<int64_t>(view.failures.size())) {
    out += fmt::format("({} failures reported in all; the server keeps the earliest and the newest {})\n",
                       view.failures_seen, view.failures.size());
  }
  return out;
}

}  // namespace ctrun::launcher
