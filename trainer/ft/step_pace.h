// StepPace: a fault-tolerant worker's recent step times, and the stall times
// its cross-replica ring waits by (docs/fault-tolerance.md, "A hung or slow
// group"). A group that stops (a stopped process, a partition) or slows
// down must not hold the others for much longer than two steps: a ring wait
// that makes no progress for that long fails (DeadlineExceeded) and the
// step is voted down; the rank that came to the ring later than that after
// its step began votes `2` (late), and the quorum server benches its group.
//
// Only steady steps are timed: committed, in the same quorum as the step
// before, with nobody healing. Until kMinPaceSteps were, every wait uses the
// ceiling (the configured stall time-out, 30 s by default), as it does on a
// step where a group heals (its peers wait while it fetches the state).
//
// Pure: no clock reads (the caller passes the durations). One owner.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>

namespace ctrun::trainer::ft {

// The pace is the lower quartile of the last kPaceWindow steady steps: a
// group held up by a slow peer for a while must not make the slowness its
// pace (its steps are as slow as the peer's), so the bound stays the one
// the run trains at when it is well.
inline constexpr std::size_t kPaceWindow = 64;
inline constexpr std::size_t kMinPaceSteps = 4;  // steps timed before the pace is used
// The floors: a steady wait never gives up sooner than kMinSteadyStall, and
// the first wait under a new quorum (its ring's connect, then the first
// all-reduce) never sooner than kMinChangedStall.
inline constexpr std::chrono::milliseconds kMinSteadyStall{50};
inline constexpr std::chrono::milliseconds kMinChangedStall{1000};

class StepPace {
 public:
  explicit StepPace(std::chrono::milliseconds ceiling) : ceiling_(ceiling) {}

  // One steady step's duration, from its plan to its decision.
  void Record(std::chrono::steady_clock::duration step);
  // The lower quartile of the last kPaceWindow steady steps; nullopt before kMinPaceSteps.
  std::optional<std::chrono::steady_clock::duration> Pace() const;

  // A steady step's all-reduce: 2x the pace, at least kMinSteadyStall.
  std::chrono::milliseconds Steady() const;
  // The first wait under a new quorum that heals nobody: 4x the pace, at
  // least kMinChangedStall.
  std::chrono::milliseconds Changed() const;
  // A step where a group heals: the ceiling.
  std::chrono::milliseconds Healing() const { return ceiling_; }

 private:
  std::chrono::milliseconds Scaled(int factor, std::chrono::milliseconds floor) const;

  std::chrono::milliseconds ceiling_;
  std::deque<std::chrono::steady_clock::duration> steps_;
};

}  // namespace ctrun::trainer::ft
