// StepWatcher: the I/O shell of StepTimes (step_times.h). It watches the
// directory of each worker's heartbeat file with inotify on the agent's
// io_context and, at every change of a file, reads its modification time
// into StepTimes: every touch is seen however short the step, with no
// polling.
//
// Thread model: io_context thread only; not thread-safe. `io` must outlive
// the watcher. Destroying it closes the inotify descriptor; nothing of it
// runs after that.
#pragma once

#include <sys/inotify.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <map>
#include <string>
#include <vector>

#include "launcher/liveness/step_times.h"
#include "launcher/liveness/watch.h"

namespace ctrun::launcher {

// The real StepWatch (launcher/liveness/watch.h).
class StepWatcher : public StepWatch {
 public:
  // Starts watching `files` (index = local rank) for a group started now.
  // Where inotify cannot be used (no descriptors left, a directory missing),
  // it logs one warning and measures the ranks it could watch (maybe none).
  StepWatcher(boost::asio::io_context& io, std::vector<std::string> files);
  ~StepWatcher() override;
  StepWatcher(const StepWatcher&) = delete;
  StepWatcher& operator=(const StepWatcher&) = delete;

  // StepTimes::Take: the ranks that finished a step since the last call.
  std::vector<StepSample> Take() override { return times_.Take(); }
  std::optional<uint64_t> Steps(int local_rank) const override { return times_.Steps(local_rank); }

 private:
  void Read();
  void OnEvents(size_t bytes);

  std::vector<std::string> files_;
  StepTimes times_;
  boost::asio::posix::stream_descriptor fd_;
  std::map<int, std::vector<int>> ranks_of_watch_;  // inotify watch -> local ranks
  alignas(inotify_event) std::array<char, 4096> buf_{};
};

}  // namespace ctrun::launcher
