// ExclusionWatch: a worker asks for its node to be excluded from the job.
//
// The agent gives every worker CTRUN_EXCLUDE_NODE_FILE, one path per node
// (<run log dir>/exclude_node). A worker that finds its node broken (a GPU
// with ECC errors, a NIC that flaps) writes a one-line reason there, in any
// language: `echo "GPU 3: uncorrectable ECC" > "$CTRUN_EXCLUDE_NODE_FILE"`.
// The agent then stops the node's workers and leaves the job as unhealthy;
// the other nodes restart without it (docs/reliability.md).
//
// The watch is inotify on the file's directory (no polling): a file closed
// after writing, or moved in, at that path is a request. Check() reads it
// at once too (a request made before the watch, or seen with a worker's
// exit). The inotify instance is made only once the workers have run for
// kWatchAfter, and the file is read then: closing an instance that holds a
// watch waits for a kernel grace period (8-24 ms here, measured), which a
// short job would pay at every exit and restart. A request in the first
// second is seen then, or at a worker's exit, whichever comes first.
//
// Ownership: borrows `io`, which must outlive it. Thread model: io_context
// thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace ctrun::launcher {

// The reason a request file holds: its first non-blank line, trimmed, at
// most 400 bytes; "(no reason given)" for an empty file; nullopt when there
// is no file at `path`.
std::optional<std::string> ReadExclusionRequest(const std::string& path);

class ExclusionWatch {
 public:
  using OnRequest = std::function<void(const std::string& reason)>;

  // How long after construction the inotify watch starts.
  static constexpr std::chrono::milliseconds kWatchAfter{1000};

  // Removes any stale request at `path` and starts watching (after
  // kWatchAfter); `on_request` runs (on the io_context) for the first
  // request seen, once. When the directory cannot be watched (inotify
  // limits), it says so once and only Check() finds requests.
  ExclusionWatch(boost::asio::io_context& io, std::string path, OnRequest on_request);
  ~ExclusionWatch();
  ExclusionWatch(const ExclusionWatch&) = delete;
  ExclusionWatch& operator=(const ExclusionWatch&) = delete;

  // Calls on_request now if a request is there (and none was reported yet).
  void Check();

  // Whether the inotify watch has started (kWatchAfter has passed and the
  // directory could be watched).
  bool watching() const { return inotify_ != nullptr; }

 private:
  void StartWatch();
  void Arm();

  std::string path_;
  std::string name_;  // the file name within its directory
  OnRequest on_request_;
  bool reported_ = false;
  boost::asio::io_context& io_;
  boost::asio::steady_timer start_timer_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> inotify_;
  std::array<char, 4096> buffer_;
  std::shared_ptr<bool> alive_;
};

}  // namespace ctrun::launcher
