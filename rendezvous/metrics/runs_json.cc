#include "rendezvous/metrics/runs_json.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <chrono>
#include <iterator>

#include "base/utf8.h"
#include "rendezvous/machine/failure_verdict.h"
#include "rendezvous/machine/verdict_line.h"

namespace ctrun::rdzv {

namespace {

// Seconds from `then` to `now`, never negative.
double Ago(TimePoint then, TimePoint now) { return std::max(0.0, std::chrono::duration<double>(now - then).count()); }

// Appends pieces of one JSON document; the caller keeps it well formed.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  Writer& Raw(std::string_view s) {
    out_ += s;
    return *this;
  }
  Writer& Key(std::string_view k) {
    out_ += JsonString(k);
    out_ += ':';
    return *this;
  }
  Writer& Str(std::string_view s) {
    out_ += JsonString(s);
    return *this;
  }
  Writer& Num(double v) {
    fmt::format_to(std::back_inserter(out_), "{:.3f}", v);
    return *this;
  }
  Writer& Int(long long v) {
    fmt::format_to(std::back_inserter(out_), "{}", v);
    return *this;
  }
  Writer& Bool(bool v) { return Raw(v ? "true" : "false"); }

 private:
  std::string& out_;
};

void WriteNodes(Writer& w, const std::vector<NodeId>& nodes) {
  w.Raw("[");
  for (size_t i = 0; i < nodes.size(); ++i) w.Raw(i ? "," : "").Str(ToString(nodes[i]));
  w.Raw("]");
}

// The "why" object: the verdict on the reported failures
// (failure_verdict.h), or null when none was reported.
void WriteWhy(Writer& w, const RunView& view) {
  if (view.failures.empty()) {
    w.Raw("null");
    return;
  }
  const FailureVerdict verdict = DecideVerdict(view.failures);
  w.Raw("{").Key("failures_seen").Int(static_cast<long long>(view.failures_seen));
  // The one line and its parts (verdict_line.h).
  if (const std::optional<VerdictSummary> s = SummarizeVerdict(verdict, view.failures)) {
    w.Raw(",").Key("verdict").Raw("{").Key("cause_class").Str(FailureClassName(s->cls));
    w.Raw(",").Key("cause_rank");
    if (s->rank) {
      w.Int(*s->rank);
    } else {
      w.Raw("null");
    }
    w.Raw(",").Key("cause_node").Str(s->node);
    w.Raw(",").Key("cause_host").Str(s->host);
    w.Raw(",").Key("evidence").Str(s->evidence);
    w.Raw(",").Key("line").Str(s->line);
    w.Raw("}");
  }
  w.Raw(",").Key("root");
  if (verdict.root) {
    const ReportedFailure& r = view.failures[*verdict.root];
    const WorkerFailureInfo& f = r.failure;
    w.Raw("{").Key("rank").Int(f.rank);
    w.Raw(",").Key("local_rank").Int(f.local_rank);
    w.Raw(",").Key("node").Str(ToString(r.node));
    w.Raw(",").Key("addr").Str(r.node.addr);
    w.Raw(",").Key("host").Str(r.host);
    w.Raw(",").Key("round").Int(static_cast<long long>(r.round));
    w.Raw(",").Key("exit_code").Int(f.exit_code);
    w.Raw(",").Key("signal").Int(f.signal);
    w.Raw(",").Key("failed_at_unix_s").Num(f.failed_at_unix_s);
    w.Raw(",").Key("error_message").Str(f.error_message);
    w.Raw(",").Key("last_line").Str(f.last_line);
    w.Raw(",").Key("error_file").Str(f.error_file);
    w.Raw(",").Key("stacks_file").Str(f.stacks_file);
    w.Raw(",").Key("node_lost").Bool(f.node_lost);
    w.Raw(",").Key("unhealthy").Bool(f.unhealthy);
    w.Raw("}");
  } else {
    w.Raw("null");
  }
  w.Raw(",").Key("consequences").Raw("[");
  bool first = true;
  for (const ConsequenceGroup& g : GroupConsequences(verdict, view.failures)) {
    w.Raw(first ? "{" : ",{").Key("reason").Str(ReasonText(g.reason));
    first = false;
    w.Raw(",").Key("ranks").Str(CompactRanks(g.ranks));
    w.Raw(",").Key("workers").Int(static_cast<long long>(g.ranks.size()));
    w.Raw(",").Key("nodes").Int(g.nodes);
    w.Raw(",").Key("min_after_s").Num(g.min_after_s);
    w.Raw(",").Key("max_after_s").Num(g.max_after_s);
    w.Raw("}");
  }
  w.Raw("]}");
}

}  // namespace

std::string WhyJson(const RunView& view) {
  std::string out;
  Writer w(out);
  WriteWhy(w, view);
  return out;
}

namespace {

std::string_view RunState(const Counts& c) { return c.closed ? "closed" : c.complete ? "running" : "forming"; }

void WriteRun(Writer& w, const RunStatus& run, TimePoint now) {
  const Counts& c = run.view.counts;
  w.Raw("{").Key("run_id").Str(run.run_id);
  w.Raw(",").Key("state").Str(RunState(c));
  w.Raw(",").Key("round").Int(static_cast<long long>(c.round));
  w.Raw(",").Key("min_nodes").Int(c.min_nodes);
  w.Raw(",").Key("max_nodes").Int(c.max_nodes);
  w.Raw(",").Key("live_nodes").Int(c.live_nodes);
  w.Raw(",").Key("world_size").Int(run.view.world_size);
  w.Raw(",").Key("last_call_in_s");
  if (c.last_call_deadline) {
    w.Num(std::max(0.0, std::chrono::duration<double>(*c.last_call_deadline - now).count()));
  } else {
    w.Raw("null");
  }
  w.Raw(",").Key("nodes").Raw("[");
  for (size_t i = 0; i < run.view.nodes.size(); ++i) {
    const NodeView& n = run.view.nodes[i];
    w.Raw(i ? ",{" : "{").Key("node").Str(ToString(n.node));
    w.Raw(",").Key("state").Str(n.state);
    w.Raw(",").Key("group_rank");
    if (n.group_rank) w.Int(*n.group_rank);
    else w.Raw("null");
    w.Raw(",").Key("workers").Int(n.local_world_size);
    w.Raw(",").Key("addr").Str(n.addr);
    w.Raw(",").Key("last_keep_alive_s").Num(n.last_seen_s);
    // Placeholders until node health checks exist (docs/metrics.md).
    w.Raw(",").Key("health").Raw("null");
    w.Raw(",").Key("step_time_s").Raw("null");
    w.Raw("}");
  }
  w.Raw("]");
  const RunHistory empty;
  const RunHistory& h = run.history ? *run.history : empty;
  w.Raw(",").Key("rounds_total").Int(static_cast<long long>(h.rounds_total()));
  w.Raw(",").Key("rounds").Raw("[");
  bool first = true;
  for (const RoundRecord& r : h.rounds()) {
    w.Raw(first ? "{" : ",{").Key("round").Int(static_cast<long long>(r.round));
    first = false;
    w.Raw(",").Key("world_size").Int(r.world_size);
    std::vector<NodeId> nodes;
    for (const Member& m : r.members) nodes.push_back(m.node);
    w.Raw(",").Key("nodes");
    WriteNodes(w, nodes);
    w.Raw(",").Key("started_s_ago").Num(Ago(r.started, now));
    w.Raw(",").Key("ended_s_ago");
    if (r.ended) w.Num(Ago(*r.ended, now));
    else w.Raw("null");
    w.Raw(",").Key("end").Str(Name(r.end));
    w.Raw("}");
  }
  w.Raw("]");
  w.Raw(",").Key("restarts_total").Int(static_cast<long long>(h.restarts_total()));
  w.Raw(",").Key("restarts").Raw("[");
  first = true;
  for (const RestartRecord& r : h.restarts()) {
    w.Raw(first ? "{" : ",{").Key("round").Int(static_cast<long long>(r.round));
    first = false;
    w.Raw(",").Key("cause").Str(CauseName(r.reason));
    w.Raw(",").Key("node").Str(ToString(r.cause));
    w.Raw(",").Key("nodes");
    WriteNodes(w, r.nodes);
    w.Raw(",").Key("s_ago").Num(Ago(r.at, now));
    w.Raw("}");
  }
  w.Raw("]");
  w.Raw(",").Key("why");
  WriteWhy(w, run.view);
  w.Raw("}");
}

}  // namespace

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceAt(text, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        // Control characters, and '<' '>' '&' so that the text can never
        // close a <script> element if someone inlines it in HTML.
        if (c < 0x20 || c == 0x7F || c == '<' || c == '>' || c == '&') {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string RunsJson(const std::vector<RunStatus>& runs, TimePoint now) {
  std::string out;
  Writer w(out);
  w.Raw("{").Key("version").Int(kRunsJsonVersion).Raw(",").Key("runs").Raw("[");
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i) w.Raw(",");
    WriteRun(w, runs[i], now);
  }
  w.Raw("]}\n");
  return out;
}

}  // namespace ctrun::rdzv
