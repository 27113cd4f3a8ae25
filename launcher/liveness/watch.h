// The agent's seams to its liveness watchers: what it needs from a heartbeat
// watch (launcher/liveness/heartbeat.h) and a step watch
// (launcher/liveness/step_watcher.h), and a factory that makes both for each
// started worker group. The real factory (RealLivenessWatchers) makes
// HeartbeatWatcher and StepWatcher; tests/launcher/agent/ scripts fakes, so
// a heartbeat miss or a step time comes when the test says so.
//
// Ownership: the caller owns what the factory makes; destroying a watch
// stops it (its miss handler never runs after that). Thread model: the
// agent's io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "launcher/liveness/step_times.h"

namespace ctrun::launcher {

struct HeartbeatTimeouts {
  Duration initial{};  // start -> first touch
  Duration steady{};   // touch -> next touch
};

// A worker whose heartbeat expired.
struct HeartbeatMiss {
  int local_rank = 0;
  Duration silent_for{};     // since its last touch, or since its start if none
  bool ever_touched = false;
};

// One group's heartbeat files, watched for a miss.
class HeartbeatWatch {
 public:
  using MissHandler = std::function<void(const HeartbeatMiss&)>;
  virtual ~HeartbeatWatch() = default;
  // Stops watching `local_rank` (it exited).
  virtual void Forget(int local_rank) = 0;
  // Whether any worker has touched its file since the watch started.
  virtual bool AnyTouched() const = 0;
};

// One group's step times, read from the same files.
class StepWatch {
 public:
  virtual ~StepWatch() = default;
  // The ranks that finished a step since the last call (StepTimes::Take).
  virtual std::vector<StepSample> Take() = 0;
  // The steps `local_rank` finished since the group started
  // (StepTimes::Steps); nullopt when not known.
  virtual std::optional<uint64_t> Steps(int /*local_rank*/) const { return std::nullopt; }
};

class LivenessWatchers {
 public:
  virtual ~LivenessWatchers() = default;
  // Watches `files` (index = local rank) from now; `on_miss` runs at most
  // once, for the first expired rank, and may destroy the watch.
  virtual std::unique_ptr<HeartbeatWatch> WatchHeartbeats(boost::asio::io_context& io,
                                                          HeartbeatTimeouts timeouts,
                                                          std::vector<std::string> files,
                                                          HeartbeatWatch::MissHandler on_miss) = 0;
  // Measures the steps of `files` (index = local rank) from now.
  virtual std::unique_ptr<StepWatch> WatchSteps(boost::asio::io_context& io,
                                                std::vector<std::string> files) = 0;
};

// The real watchers (HeartbeatWatcher, StepWatcher). Stateless; lives for
// the whole process.
LivenessWatchers& RealLivenessWatchers();

}  // namespace ctrun::launcher
