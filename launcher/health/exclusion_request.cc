#include "launcher/health/exclusion_request.h"

#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace ctrun::launcher {

namespace {

constexpr size_t kMaxReason = 400;

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::optional<std::string> ReadExclusionRequest(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.empty()) continue;
    if (line.size() > kMaxReason) line = line.substr(0, kMaxReason) + "...";
    return line;
  }
  return std::string("(no reason given)");
}

ExclusionWatch::ExclusionWatch(boost::asio::io_context& io, std::string path, OnRequest on_request)
    : path_(std::move(path)),
      on_request_(std::move(on_request)),
      io_(io),
      start_timer_(io),
      alive_(std::make_shared<bool>(true)) {
  ::unlink(path_.c_str());
  start_timer_.expires_after(kWatchAfter);
  std::weak_ptr<bool> alive = alive_;
  start_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || !alive.lock()) return;
    StartWatch();
    Check();  // a request made before the watch; may destroy this watch
  });
}

void ExclusionWatch::StartWatch() {
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash);
  name_ = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0 || ::inotify_add_watch(fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
    spdlog::warn("cannot watch {} for CTRUN_EXCLUDE_NODE_FILE requests ({}); a request is seen when a worker "
                 "exits",
                 dir, strerror(errno));
    if (fd >= 0) ::close(fd);
    return;
  }
  inotify_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
  Arm();
}

ExclusionWatch::~ExclusionWatch() {
  *alive_ = false;
  start_timer_.cancel();
  if (inotify_) {
    boost::system::error_code ignored;
    inotify_->close(ignored);
  }
}

void ExclusionWatch::Arm() {
  std::weak_ptr<bool> alive = alive_;
  inotify_->async_read_some(boost::asio::buffer(buffer_), [this, alive](const boost::system::error_code& ec,
                                                                        size_t n) {
    if (ec || !alive.lock()) return;
    bool ours = false;
    for (size_t off = 0; off + sizeof(inotify_event) <= n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buffer_.data() + off);
      if (ev->len > 0 && name_ == ev->name) ours = true;
      off += sizeof(inotify_event) + ev->len;
    }
    if (ours) Check();
    if (alive.lock() && inotify_) Arm();
  });
}

void ExclusionWatch::Check() {
  if (reported_) return;
  std::optional<std::string> reason = ReadExclusionRequest(path_);
  if (!reason) return;
  reported_ = true;
  on_request_(*reason);  // may destroy this watch
}

}  // namespace ctrun::launcher
