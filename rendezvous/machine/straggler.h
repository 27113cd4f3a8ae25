// Straggler detection: which rank of a running round is much slower than the
// rest, from the step intervals the agents report with their keep-alives.
//
// An agent measures each local worker's step interval from the touches of
// its heartbeat file (launcher/liveness/step_times.h) and, with every
// keep-alive, reports for each rank that finished at least one step since
// its previous keep-alive: the median of those new intervals (one "report").
// The detector keeps every rank's latest report. The job median is the
// median of all ranks' latest intervals (the mean of the middle two for an
// even count); ranks that never reported (no heartbeat) are not in it.
//
// A report is slow when its interval is above factor x the job median
// (counted with this report in). A rank is flagged a straggler after
// `intervals` consecutive slow reports, and recovers at its first report
// that is not slow. Each flag and each recovery is one StragglerChange,
// queued for the straggler's own node (its next keep-alive's reply carries
// it; the agent writes the `straggler` event) and returned to the caller
// (the server logs it). factor 0 turns flagging off (intervals are still
// kept, for the metric and `ctrun status`).
//
// Rounds: reports carry the round the agent's workers run in. A report of a
// newer round forgets everything of the older one (ranks are renumbered); a
// report of an older round is ignored.
//
// Pure: events in, decisions out; no I/O, no clock reads, no threads.
// Plain copyable state; the server keeps one per run, under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "rendezvous/machine/node_order.h"

namespace ctrun::rdzv {

struct StragglerParams {
  double factor = 1.5;  // k: slow means above k x the job median; 0 = never flag
  int intervals = 5;    // M: consecutive slow reports before a rank is flagged (>= 1)

  bool operator==(const StragglerParams&) const = default;
};

// One rank in one agent's report.
struct RankStep {
  int rank = 0;        // global rank in the round
  int local_rank = 0;
  Duration step{};     // the median of its step intervals since the previous report
  uint64_t steps = 0;  // intervals the agent measured for it this round, up to now

  bool operator==(const RankStep&) const = default;
};

// What one agent sends with a keep-alive.
struct StepReport {
  uint64_t round = 0;
  StragglerParams params;
  std::vector<RankStep> ranks;

  bool operator==(const StepReport&) const = default;
};

// A rank was flagged (slow) or recovered (!slow).
struct StragglerChange {
  NodeId node;
  int rank = 0;
  int local_rank = 0;
  bool slow = true;
  Duration step{};        // the report that decided it
  Duration job_median{};  // the job median it was compared with
  StragglerParams params;

  bool operator==(const StragglerChange&) const = default;
};

// A rank's latest report, for the metric and the status view.
struct RankStepView {
  NodeId node;
  int rank = 0;
  int local_rank = 0;
  Duration step{};
  bool straggler = false;
};

class StragglerDetector {
 public:
  // Applies `report` from `node`. Params are the report's (every agent is
  // given the same flags; the latest report's win). A rank whose `steps`
  // did not change since its last report is not a new report. Returns the
  // flags and recoveries this report caused (any node's: a new median can
  // flag or clear another rank only at that rank's own next report, so in
  // practice the reporting node's), also queued for their nodes.
  std::vector<StragglerChange> Report(const NodeId& node, const StepReport& report);

  // Changes queued for `node` since its last call, oldest first; clears them.
  std::vector<StragglerChange> TakeChanges(const NodeId& node);

  // The median of all ranks' latest intervals; nullopt when none reported.
  std::optional<Duration> JobMedian() const;
  // The median of `node`'s ranks' latest intervals; nullopt when none.
  std::optional<Duration> NodeMedian(const NodeId& node) const;
  // Every rank's latest report, by rank.
  std::vector<RankStepView> Ranks() const;
  // The round the kept reports belong to (0: none yet).
  uint64_t round() const { return round_; }

 private:
  struct RankState {
    NodeId node;
    int local_rank = 0;
    Duration step{};
    uint64_t steps = 0;
    int slow_streak = 0;
    bool straggler = false;
  };

  uint64_t round_ = 0;
  StragglerParams params_;
  std::map<int, RankState> ranks_;  // by global rank
  std::map<NodeId, std::vector<StragglerChange>, NodeIdLess> pending_;
};

// The median of `values` (the mean of the middle two for an even count);
// nullopt when empty. `values` is reordered.
std::optional<Duration> Median(std::vector<Duration>& values);

}  // namespace ctrun::rdzv
