#include "launcher/liveness/step_watcher.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ctrun::launcher {
namespace {

constexpr uint32_t kMask = IN_ATTRIB | IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO;

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

std::string BaseOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::optional<WallTime> ModTime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::seconds(st.st_mtim.tv_sec) +
                                                                 std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

}  // namespace

StepWatcher::StepWatcher(boost::asio::io_context& io, std::vector<std::string> files)
    : files_(std::move(files)),
      times_(static_cast<int>(files_.size()), std::chrono::system_clock::now()),
      fd_(io) {
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    spdlog::warn("step times are not measured (no straggler detection): inotify_init1: {}", std::strerror(errno));
    return;
  }
  fd_.assign(fd);
  for (size_t i = 0; i < files_.size(); ++i) {
    const std::string dir = DirOf(files_[i]);
    const int wd = ::inotify_add_watch(fd, dir.c_str(), kMask);
    if (wd < 0) {
      spdlog::warn("step times of local rank {} are not measured: cannot watch {}: {}", i, dir, std::strerror(errno));
      continue;
    }
    ranks_of_watch_[wd].push_back(static_cast<int>(i));
  }
  Read();
}

StepWatcher::~StepWatcher() {
  boost::system::error_code ignored;
  fd_.close(ignored);
}

void StepWatcher::Read() {
  fd_.async_read_some(boost::asio::buffer(buf_), [this](const boost::system::error_code& ec, size_t bytes) {
    if (ec) return;  // closed (the watcher is gone) or broken: measure no more
    OnEvents(bytes);
    Read();
  });
}

void StepWatcher::OnEvents(size_t bytes) {
  for (size_t off = 0; off + sizeof(inotify_event) <= bytes;) {
    const auto* e = reinterpret_cast<const inotify_event*>(buf_.data() + off);
    off += sizeof(inotify_event) + e->len;
    if (e->len == 0) continue;
    auto it = ranks_of_watch_.find(e->wd);
    if (it == ranks_of_watch_.end()) continue;
    for (int rank : it->second) {
      const std::string& file = files_[rank];
      if (BaseOf(file) != e->name) continue;
      if (std::optional<WallTime> mtime = ModTime(file)) times_.Touch(rank, *mtime);
    }
  }
}

}  // namespace ctrun::launcher
