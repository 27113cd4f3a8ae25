#include "launcher/liveness/heartbeat.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>

namespace ctrun::launcher {

HeartbeatDeadlines::HeartbeatDeadlines(HeartbeatTimeouts timeouts, int workers, TimePoint started)
    : timeouts_(timeouts), started_(started), ranks_(std::max(workers, 0)) {}

void HeartbeatDeadlines::Observe(int local_rank, std::optional<Duration> age, TimePoint now) {
  if (!age || local_rank < 0 || local_rank >= static_cast<int>(ranks_.size())) return;
  Rank& r = ranks_[local_rank];
  if (!r.watched) return;
  const TimePoint touched = now - std::max(*age, Duration::zero());
  // A file from before the start is a leftover, not a sign of life.
  if (touched < started_) return;
  if (!r.last_touch || touched > *r.last_touch) r.last_touch = touched;
}

void HeartbeatDeadlines::Forget(int local_rank) {
  if (local_rank >= 0 && local_rank < static_cast<int>(ranks_.size())) {
    ranks_[local_rank].watched = false;
  }
}

TimePoint HeartbeatDeadlines::Deadline(const Rank& r) const {
  return r.last_touch ? *r.last_touch + timeouts_.steady : started_ + timeouts_.initial;
}

std::optional<HeartbeatMiss> HeartbeatDeadlines::Expired(TimePoint now) const {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& r = ranks_[i];
    if (!r.watched || now < Deadline(r)) continue;
    HeartbeatMiss miss;
    miss.local_rank = static_cast<int>(i);
    miss.silent_for = now - r.last_touch.value_or(started_);
    miss.ever_touched = r.last_touch.has_value();
    return miss;
  }
  return std::nullopt;
}

std::optional<TimePoint> HeartbeatDeadlines::NextDeadline() const {
  std::optional<TimePoint> next;
  for (const Rank& r : ranks_) {
    if (!r.watched) continue;
    const TimePoint d = Deadline(r);
    if (!next || d < *next) next = d;
  }
  return next;
}

std::optional<TimePoint> HeartbeatDeadlines::NextCheck(TimePoint now) const {
  std::optional<TimePoint> next = NextDeadline();
  const bool waiting_first = std::any_of(ranks_.begin(), ranks_.end(),
                                         [](const Rank& r) { return r.watched && !r.last_touch; });
  if (next && waiting_first) next = std::min(*next, now + timeouts_.steady);
  return next;
}

std::optional<Duration> FileAge(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  const auto mtime = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  const auto age = std::chrono::system_clock::now() - mtime;
  return std::max(std::chrono::duration_cast<Duration>(age), Duration::zero());
}

HeartbeatWatcher::HeartbeatWatcher(boost::asio::io_context& io, HeartbeatTimeouts timeouts,
                                   std::vector<std::string> files, MissHandler on_miss)
    : timer_(io),
      files_(std::move(files)),
      started_(Clock::now()),
      deadlines_(timeouts, static_cast<int>(files_.size()), started_),
      on_miss_(std::move(on_miss)) {
  Arm();
}

HeartbeatWatcher::~HeartbeatWatcher() { timer_.cancel(); }

void HeartbeatWatcher::Forget(int local_rank) { deadlines_.Forget(local_rank); }

bool HeartbeatWatcher::AnyTouched() const {
  const Duration running = Clock::now() - started_;
  for (const std::string& f : files_) {
    std::optional<Duration> age = FileAge(f);
    if (age && *age <= running) return true;
  }
  return false;
}

void HeartbeatWatcher::Arm() {
  std::optional<TimePoint> next = deadlines_.NextCheck(Clock::now());
  if (!next) return;
  timer_.expires_at(*next);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Check();
  });
}

void HeartbeatWatcher::Check() {
  const TimePoint now = Clock::now();
  for (size_t i = 0; i < files_.size(); ++i) {
    deadlines_.Observe(static_cast<int>(i), FileAge(files_[i]), now);
  }
  if (std::optional<HeartbeatMiss> miss = deadlines_.Expired(now)) {
    // Report once: the agent is about to stop the group.
    MissHandler handler = std::move(on_miss_);
    on_miss_ = nullptr;
    for (size_t i = 0; i < files_.size(); ++i) deadlines_.Forget(static_cast<int>(i));
    if (handler) handler(*miss);
    return;
  }
  Arm();
}

}  // namespace ctrun::launcher
