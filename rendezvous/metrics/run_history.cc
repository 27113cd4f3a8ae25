#include "rendezvous/metrics/run_history.h"

#include <type_traits>
#include <variant>

namespace ctrun::rdzv {

std::string_view Name(RoundEnd end) {
  switch (end) {
    case RoundEnd::kRunning: return "running";
    case RoundEnd::kRestarted: return "restarted";
    case RoundEnd::kClosed: return "closed";
  }
  return "unknown";
}

std::string_view CauseName(RestartReason reason) {
  switch (reason) {
    case RestartReason::kNodeJoinedWaitList: return "node_joined";
    case RestartReason::kNodeLost: return "node_lost";
    case RestartReason::kNodeLeft: return "node_left";
    case RestartReason::kWorkersFailed: return "workers_failed";
  }
  return "unknown";
}

void RunHistory::End(uint64_t round, RoundEnd end, TimePoint now) {
  if (rounds_.empty()) return;
  RoundRecord& last = rounds_.back();
  // Only the newest round can still be running: a round completes after the
  // previous one ended.
  if (last.round != round || last.end != RoundEnd::kRunning) return;
  last.end = end;
  last.ended = now;
}

void RunHistory::Add(const std::vector<Decision>& decisions, TimePoint now) {
  for (const Decision& d : decisions) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, RoundComplete>) {
            ++rounds_total_;
            rounds_.push_back(RoundRecord{x.round, x.world_size, x.members, now, std::nullopt, RoundEnd::kRunning});
            if (rounds_.size() > kMaxRounds) rounds_.pop_front();
          } else if constexpr (std::is_same_v<T, RestartRequested>) {
            ++restarts_total_;
            restarts_.push_back(RestartRecord{x.round, x.reason, x.cause, x.nodes, now});
            if (restarts_.size() > kMaxRestarts) restarts_.pop_front();
            End(x.round, RoundEnd::kRestarted, now);
          } else if constexpr (std::is_same_v<T, Closed>) {
            End(x.round, RoundEnd::kClosed, now);
          }
        },
        d);
  }
}

}  // namespace ctrun::rdzv
