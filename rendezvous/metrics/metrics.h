// Metrics: what a rendezvous server has seen, in Prometheus' text format
// (ctrund --metrics-port; docs/metrics.md).
//
// Pure: the server feeds it the Joins it steps and the decisions every Step
// returns, with the time it passed to Step; Render() adds the runs' current
// numbers (machine Counts) at scrape time. No I/O, no clock reads. It also
// keeps each run's recent rounds and restarts (History) for the status page.
//
// Series (every one labelled with run_id):
//   ctrun_rounds_total            counter  rounds completed
//   ctrun_restarts_total{cause}   counter  running rounds broken: node_joined,
//                                          node_lost, node_left, workers_failed
//   ctrun_evictions_total         counter  nodes evicted for missed keep-alives
//   ctrun_join_timeouts_total     counter  nodes whose join timed out
//   ctrun_join_latency_seconds    histogram  a node's Join to the RoundComplete
//                                          that took it in
//   ctrun_round                   gauge    the round being formed or run
//   ctrun_nodes{state}            gauge    participant, member, rejoining, spare
//   ctrun_live_nodes              gauge    nodes the run holds
//   ctrun_unhealthy_nodes_total   counter  nodes that left the run as unhealthy
//                                          (the machine's count, Counts::unhealthy)
//   ctrun_closed                  gauge    1 once the run is closed
//   ctrun_world_size              gauge    workers in the running round (0 while forming)
//   ctrun_rank_step_seconds{node,rank}  gauge  a rank's latest step time (straggler.h);
//                                          only ranks whose agents report one
//   ctrun_stragglers              gauge    ranks flagged as stragglers now
//   ctrun_stragglers_total        counter  times a rank was flagged a straggler
// and, unlabelled, ctrun_runs (runs served).
//
// Thread model: not thread-safe; the server calls it under its lock.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "rendezvous/machine/events.h"
#include "rendezvous/machine/machine.h"
#include "rendezvous/machine/node_order.h"
#include "rendezvous/machine/straggler.h"
#include "rendezvous/metrics/run_history.h"

namespace ctrun::rdzv {

// Upper bounds (seconds) of the join latency histogram's buckets; +Inf follows.
inline constexpr std::array<double, 12> kJoinLatencyBuckets = {0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                                               2.5,  5,    10,  30,   60,  300};

class Metrics {
 public:
  // A Join of `node` in `run_id` is about to be stepped at `now`. A node
  // already waiting keeps its first time (a repeated Join is idempotent).
  void OnJoin(const std::string& run_id, const NodeId& node, TimePoint now);

  // The decisions one Step of `run_id` returned at `now`.
  void OnDecisions(const std::string& run_id, const std::vector<Decision>& decisions, TimePoint now);

  // The straggler flags and recoveries a step report of `run_id` caused.
  void OnStragglerChanges(const std::string& run_id, const std::vector<StragglerChange>& changes);

  // What a run looks like now, for the gauges.
  struct RunNow {
    std::string run_id;
    Counts counts;
    int world_size = 0;
    std::vector<RankStepView> steps;  // the run's StragglerDetector::Ranks()
  };

  // The exposition text (format 0.0.4): every series of every run in
  // `runs` and of every run the counters have seen, runs sorted by id.
  std::string Render(const std::vector<RunNow>& runs) const;

  // Drops every series and the history of `run_id` (a run the server
  // forgot: ctrund --closed-run-ttl). Its counters start again from zero if
  // the id is used again.
  void Forget(const std::string& run_id) { runs_.erase(run_id); }

  // How many runs it holds series for.
  size_t runs() const { return runs_.size(); }

  // The recent rounds and restarts of `run_id` (run_history.h); null for a
  // run no decision was fed for. Valid until the next call of a non-const
  // method.
  const RunHistory* History(const std::string& run_id) const;

 private:
  struct RunCounters {
    uint64_t rounds = 0;
    uint64_t restarts_joined = 0, restarts_lost = 0, restarts_left = 0, restarts_failed = 0;
    uint64_t evictions = 0, join_timeouts = 0;
    uint64_t stragglers = 0;
    std::array<uint64_t, kJoinLatencyBuckets.size()> buckets{};  // non-cumulative
    uint64_t latency_count = 0;
    double latency_sum = 0;
    std::map<NodeId, TimePoint, NodeIdLess> joining;  // Join seen, not yet in a round
    RunHistory history;
  };

  std::map<std::string, RunCounters> runs_;
};

// `value` as a Prometheus label value: backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& value);

}  // namespace ctrun::rdzv
