#include "launcher/liveness/watch.h"

#include "launcher/liveness/heartbeat.h"
#include "launcher/liveness/step_watcher.h"

namespace ctrun::launcher {
namespace {

class RealWatchers : public LivenessWatchers {
 public:
  std::unique_ptr<HeartbeatWatch> WatchHeartbeats(boost::asio::io_context& io, HeartbeatTimeouts timeouts,
                                                  std::vector<std::string> files,
                                                  HeartbeatWatch::MissHandler on_miss) override {
    return std::make_unique<HeartbeatWatcher>(io, timeouts, std::move(files), std::move(on_miss));
  }
  std::unique_ptr<StepWatch> WatchSteps(boost::asio::io_context& io, std::vector<std::string> files) override {
    return std::make_unique<StepWatcher>(io, std::move(files));
  }
};

}  // namespace

LivenessWatchers& RealLivenessWatchers() {
  static RealWatchers watchers;
  return watchers;
}

}  // namespace ctrun::launcher
