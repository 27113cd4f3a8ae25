// Step times: each local worker's step interval, from the touches of its
// heartbeat file (launcher/liveness/heartbeat.h). A touch is a new
// modification time of the file; the interval between two touches is one
// step. The first touch only starts the count (the time before it is
// start-up, not a step); a touch from before the group started is a
// leftover and ignored, and so is one no newer than the last seen.
//
// Take() is what the agent sends with each keep-alive: for every rank that
// finished at least one step since the previous Take, the median of those
// new intervals (up to the last kWindow of them) and its step count so far.
//
// StepTimes is pure (no I/O, no clock reads: touch times are passed in).
// StepWatcher (step_watcher.h) feeds it from inotify.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "base/clock.h"

namespace ctrun::launcher {

using WallTime = std::chrono::system_clock::time_point;

struct StepSample {
  int local_rank = 0;
  Duration step{};     // median of the intervals since the previous Take
  uint64_t steps = 0;  // intervals measured since the group started

  bool operator==(const StepSample&) const = default;
};

class StepTimes {
 public:
  // New intervals kept per rank between two Takes (the most recent ones).
  static constexpr size_t kWindow = 64;

  // Local ranks 0..workers-1, whose group started at `started`.
  StepTimes(int workers, WallTime started);

  // Local rank `local_rank`'s file has modification time `mtime`. Unknown
  // ranks are ignored.
  void Touch(int local_rank, WallTime mtime);

  // The ranks with new intervals since the last call, by local rank.
  std::vector<StepSample> Take();

  // The intervals measured for `local_rank` since the group started (its
  // steps); nullopt for a rank it does not know.
  std::optional<uint64_t> Steps(int local_rank) const;

 private:
  struct Rank {
    std::optional<WallTime> last;
    uint64_t steps = 0;
    std::deque<Duration> fresh;  // intervals since the last Take
  };
  WallTime started_;
  std::vector<Rank> ranks_;
};

}  // namespace ctrun::launcher
