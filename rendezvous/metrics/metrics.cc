#include "rendezvous/metrics/metrics.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <type_traits>
#include <variant>

namespace ctrun::rdzv {

void Metrics::OnJoin(const std::string& run_id, const NodeId& node, TimePoint now) {
  runs_[run_id].joining.emplace(node, now);
}

void Metrics::OnDecisions(const std::string& run_id, const std::vector<Decision>& decisions, TimePoint now) {
  if (decisions.empty()) return;
  RunCounters& run = runs_[run_id];
  run.history.Add(decisions, now);
  for (const Decision& d : decisions) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, RoundComplete>) {
            ++run.rounds;
            for (const Member& m : x.members) {
              auto it = run.joining.find(m.node);
              if (it == run.joining.end()) continue;
              const double s = std::max(0.0, std::chrono::duration<double>(now - it->second).count());
              run.joining.erase(it);
              const auto bucket = std::lower_bound(kJoinLatencyBuckets.begin(), kJoinLatencyBuckets.end(), s);
              if (bucket != kJoinLatencyBuckets.end()) ++run.buckets[bucket - kJoinLatencyBuckets.begin()];
              ++run.latency_count;
              run.latency_sum += s;
            }
          } else if constexpr (std::is_same_v<T, RestartRequested>) {
            switch (x.reason) {
              case RestartReason::kNodeJoinedWaitList: ++run.restarts_joined; break;
              case RestartReason::kNodeLost: ++run.restarts_lost; break;
              case RestartReason::kNodeLeft: ++run.restarts_left; break;
              case RestartReason::kWorkersFailed: ++run.restarts_failed; break;
            }
          } else if constexpr (std::is_same_v<T, Evicted>) {
            ++run.evictions;
            run.joining.erase(x.node);
          } else if constexpr (std::is_same_v<T, TimedOut>) {
            ++run.join_timeouts;
            run.joining.erase(x.node);
          } else if constexpr (std::is_same_v<T, Rejected>) {
            run.joining.erase(x.node);
          } else if constexpr (std::is_same_v<T, Closed>) {
            run.joining.clear();
          }
        },
        d);
  }
}

void Metrics::OnStragglerChanges(const std::string& run_id, const std::vector<StragglerChange>& changes) {
  for (const StragglerChange& c : changes) {
    if (c.slow) ++runs_[run_id].stragglers;
  }
}

const RunHistory* Metrics::History(const std::string& run_id) const {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : &it->second.history;
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

// One metric family: HELP and TYPE, then its samples.
class Family {
 public:
  Family(std::string& out, std::string_view name, std::string_view type, std::string_view help)
      : out_(out), name_(name) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  // `labels` is the inside of {...}, already escaped; "" for none.
  template <typename V>
  void Sample(std::string_view suffix, const std::string& labels, V value) {
    if (labels.empty()) fmt::format_to(std::back_inserter(out_), "{}{} {}\n", name_, suffix, value);
    else fmt::format_to(std::back_inserter(out_), "{}{}{{{}}} {}\n", name_, suffix, labels, value);
  }

 private:
  std::string& out_;
  std::string_view name_;
};

std::string RunLabel(const std::string& id) { return "run_id=\"" + EscapeLabelValue(id) + "\""; }

// The gauges of the runs in `now_of` (served now), in its order.
void RenderGauges(const std::map<std::string, const Metrics::RunNow*>& now_of, std::string& out) {
  {
    Family f(out, "ctrun_round", "gauge", "The round being formed, or the running one.");
    for (const auto& [id, r] : now_of) f.Sample("", RunLabel(id), r->counts.round);
  }
  {
    Family f(out, "ctrun_nodes", "gauge",
             "Nodes by state: participant (forming round), member (running round), rejoining (expected back after "
             "a restart), spare (the run is full).");
    for (const auto& [id, r] : now_of) {
      f.Sample("", RunLabel(id) + ",state=\"participant\"", r->counts.participants);
      f.Sample("", RunLabel(id) + ",state=\"member\"", r->counts.members);
      f.Sample("", RunLabel(id) + ",state=\"rejoining\"", r->counts.rejoining);
      f.Sample("", RunLabel(id) + ",state=\"spare\"", r->counts.redundant);
    }
  }
  {
    Family f(out, "ctrun_live_nodes", "gauge", "Nodes the run holds (after close: members not yet gone).");
    for (const auto& [id, r] : now_of) f.Sample("", RunLabel(id), r->counts.live_nodes);
  }
  {
    Family f(out, "ctrun_closed", "gauge", "1 once the run is closed (its job ended).");
    for (const auto& [id, r] : now_of) f.Sample("", RunLabel(id), r->counts.closed ? 1 : 0);
  }
  {
    // Counted by the machine itself (it closes the run on it), so it is
    // read with the gauges.
    Family f(out, "ctrun_unhealthy_nodes_total", "counter",
             "Nodes that left the run as unhealthy (failed health check or exclusion request).");
    for (const auto& [id, r] : now_of) f.Sample("", RunLabel(id), r->counts.unhealthy);
  }
  {
    Family f(out, "ctrun_world_size", "gauge", "Workers in the running round; 0 while a round forms.");
    for (const auto& [id, r] : now_of) f.Sample("", RunLabel(id), r->world_size);
  }
  {
    Family f(out, "ctrun_rank_step_seconds", "gauge",
             "A rank's latest step time: the median interval between touches of its heartbeat file.");
    for (const auto& [id, r] : now_of) {
      for (const RankStepView& s : r->steps) {
        f.Sample("", fmt::format("{},node=\"{}\",rank=\"{}\"", RunLabel(id), EscapeLabelValue(ToString(s.node)), s.rank),
                 std::chrono::duration<double>(s.step).count());
      }
    }
  }
  {
    Family f(out, "ctrun_stragglers", "gauge", "Ranks flagged as stragglers now (see ctrun_stragglers_total).");
    for (const auto& [id, r] : now_of) {
      f.Sample("", RunLabel(id), std::count_if(r->steps.begin(), r->steps.end(),
                                               [](const RankStepView& s) { return s.straggler; }));
    }
  }
}

}  // namespace

std::string Metrics::Render(const std::vector<RunNow>& runs) const {
  // Every run id that is served now or has counted something, sorted.
  std::map<std::string, const RunNow*> now_of;
  for (const RunNow& r : runs) now_of[r.run_id] = &r;
  std::set<std::string> ids;
  for (const auto& [id, _] : now_of) ids.insert(id);
  for (const auto& [id, _] : runs_) ids.insert(id);
  static const RunCounters kNone;
  auto counters = [&](const std::string& id) -> const RunCounters& {
    auto it = runs_.find(id);
    return it == runs_.end() ? kNone : it->second;
  };

  std::string out;
  Family(out, "ctrun_runs", "gauge", "Runs this server serves.").Sample("", "", runs.size());
  {
    Family f(out, "ctrun_rounds_total", "counter", "Rounds completed.");
    for (const std::string& id : ids) f.Sample("", RunLabel(id), counters(id).rounds);
  }
  {
    Family f(out, "ctrun_restarts_total", "counter",
             "Running rounds broken, by cause: a node joined (scale-up), was lost (missed keep-alives) or left, "
             "or a node's workers failed.");
    for (const std::string& id : ids) {
      const RunCounters& c = counters(id);
      const auto cause = [&](RestartReason r) { return RunLabel(id) + ",cause=\"" + std::string(CauseName(r)) + "\""; };
      f.Sample("", cause(RestartReason::kNodeJoinedWaitList), c.restarts_joined);
      f.Sample("", cause(RestartReason::kNodeLost), c.restarts_lost);
      f.Sample("", cause(RestartReason::kNodeLeft), c.restarts_left);
      f.Sample("", cause(RestartReason::kWorkersFailed), c.restarts_failed);
    }
  }
  {
    Family f(out, "ctrun_evictions_total", "counter", "Nodes evicted for missed keep-alives.");
    for (const std::string& id : ids) f.Sample("", RunLabel(id), counters(id).evictions);
  }
  {
    Family f(out, "ctrun_join_timeouts_total", "counter", "Nodes whose join timed out before a round took them in.");
    for (const std::string& id : ids) f.Sample("", RunLabel(id), counters(id).join_timeouts);
  }
  {
    Family f(out, "ctrun_stragglers_total", "counter",
             "Times a rank was flagged a straggler (slower than --straggler-factor x the job median).");
    for (const std::string& id : ids) f.Sample("", RunLabel(id), counters(id).stragglers);
  }
  {
    Family f(out, "ctrun_join_latency_seconds", "histogram",
             "Seconds from a node's Join to the completed round that took it in.");
    for (const std::string& id : ids) {
      const RunCounters& c = counters(id);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kJoinLatencyBuckets.size(); ++i) {
        cumulative += c.buckets[i];
        f.Sample("_bucket", RunLabel(id) + fmt::format(",le=\"{}\"", kJoinLatencyBuckets[i]), cumulative);
      }
      f.Sample("_bucket", RunLabel(id) + ",le=\"+Inf\"", c.latency_count);
      f.Sample("_sum", RunLabel(id), c.latency_sum);
      f.Sample("_count", RunLabel(id), c.latency_count);
    }
  }
  RenderGauges(now_of, out);
  return out;
}

}  // namespace ctrun::rdzv
