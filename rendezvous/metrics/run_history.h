// RunHistory: the recent rounds of one run and the restarts that ended
// them, for the status page (GET /api/runs; docs/metrics.md).
//
// Pure and bounded: fed the decisions each Step of the run returned, with
// the time the server passed to it; keeps the last kMaxRounds rounds and the
// last kMaxRestarts restarts (older ones only in the totals). No I/O, no
// clock reads. Kept in memory only: a ctrund restarted with --state-dir
// resumes its runs with an empty history.
//
// Thread model: not thread-safe; the owner (Metrics) is called under the
// server's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "rendezvous/machine/events.h"
#include "rendezvous/machine/node_order.h"

namespace ctrun::rdzv {

// How a recorded round ended.
enum class RoundEnd {
  kRunning,    // still the running round
  kRestarted,  // broken by a restart (RestartRecord of the same round)
  kClosed,     // the run was closed while it ran
};

std::string_view Name(RoundEnd end);  // "running", "restarted", "closed"

// The cause of a restart as ctrun_restarts_total{cause} and /api/runs name
// it: "node_joined", "node_lost", "node_left", "workers_failed".
std::string_view CauseName(RestartReason reason);

struct RoundRecord {
  uint64_t round = 0;
  int world_size = 0;
  std::vector<Member> members;  // group-rank order
  TimePoint started;            // when it completed
  std::optional<TimePoint> ended;
  RoundEnd end = RoundEnd::kRunning;
  bool operator==(const RoundRecord&) const = default;
};

struct RestartRecord {
  uint64_t round = 0;           // the round it broke
  RestartReason reason = RestartReason::kNodeLeft;
  NodeId cause;                 // the node whose arrival, loss, departure or failed workers broke it
  std::vector<NodeId> nodes;    // the members asked to restart
  TimePoint at;
  bool operator==(const RestartRecord&) const = default;
};

class RunHistory {
 public:
  static constexpr size_t kMaxRounds = 20;
  static constexpr size_t kMaxRestarts = 20;

  // Records what `decisions` (one Step's, in order) did at `now`: a
  // RoundComplete adds a round; a RestartRequested adds a restart and ends
  // its round; Closed ends the running round. Other decisions are ignored.
  void Add(const std::vector<Decision>& decisions, TimePoint now);

  // Oldest first, at most kMaxRounds / kMaxRestarts.
  const std::deque<RoundRecord>& rounds() const { return rounds_; }
  const std::deque<RestartRecord>& restarts() const { return restarts_; }

  // Every round and restart seen, the dropped ones included.
  uint64_t rounds_total() const { return rounds_total_; }
  uint64_t restarts_total() const { return restarts_total_; }

 private:
  void End(uint64_t round, RoundEnd end, TimePoint now);

  std::deque<RoundRecord> rounds_;
  std::deque<RestartRecord> restarts_;
  uint64_t rounds_total_ = 0;
  uint64_t restarts_total_ = 0;
};

}  // namespace ctrun::rdzv
