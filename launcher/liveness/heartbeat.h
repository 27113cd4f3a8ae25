// Worker heartbeat: hang detection for the local worker group, as NVIDIA's
// ft_launcher does it. Each worker is given one file (CTRUN_HEARTBEAT_FILE)
// that its training loop touches; a worker whose file has not been touched
// for too long is declared hung and the agent kills the whole group.
//
// Two timeouts: `initial` runs from the worker's start until its first touch
// (imports, data loading, process-group setup), `steady` from each touch to
// the next. Touches are read from the file's mtime; a touch older than the
// worker's start (a stale file) does not count.
//
// HeartbeatDeadlines is the pure decision part (no I/O, no clock reads; the
// caller passes `now`). HeartbeatWatcher is the thin Asio shell around it:
// one steady_timer armed at the next check (NextCheck), where it stats the
// files.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "launcher/liveness/watch.h"

namespace ctrun::launcher {

// HeartbeatTimeouts and HeartbeatMiss: launcher/liveness/watch.h.

// Deadlines of one started group. Plain copyable state; deterministic.
class HeartbeatDeadlines {
 public:
  // `workers` local ranks 0..workers-1, all started at `started`.
  HeartbeatDeadlines(HeartbeatTimeouts timeouts, int workers, TimePoint started);

  // Records that local rank `local_rank`'s file was last touched `age` before
  // `now` (nullopt: no file yet). Touches before the start are ignored, a
  // touch older than one already seen changes nothing. Unknown or forgotten
  // ranks are ignored.
  void Observe(int local_rank, std::optional<Duration> age, TimePoint now);

  // Stops watching `local_rank` (it exited). Unknown ranks are ignored.
  void Forget(int local_rank);

  // The first watched rank (lowest local rank) whose deadline is <= now, or
  // nullopt when none has expired.
  std::optional<HeartbeatMiss> Expired(TimePoint now) const;

  // The earliest deadline of the watched ranks; nullopt when none is watched.
  std::optional<TimePoint> NextDeadline() const;

  // When the files must next be looked at: the next deadline, but no later
  // than now + steady while a watched rank has not touched yet (else a first
  // touch would only be seen at the initial deadline, and a hang soon after
  // it detected that late). nullopt when none is watched.
  std::optional<TimePoint> NextCheck(TimePoint now) const;

 private:
  struct Rank {
    bool watched = true;
    std::optional<TimePoint> last_touch;
  };
  TimePoint Deadline(const Rank& r) const;

  HeartbeatTimeouts timeouts_;
  TimePoint started_;
  std::vector<Rank> ranks_;
};

// The real HeartbeatWatch (launcher/liveness/watch.h): watches one heartbeat file per local rank on the
// io_context's thread. The
// timer fires only at the next check; then every watched file is stat'ed
// (mtime against the wall clock) and either a miss is reported or the timer
// is re-armed. Not thread-safe; `io` must outlive the watcher. Destroying it
// cancels the timer; `on_miss` is never called after that.
class HeartbeatWatcher : public HeartbeatWatch {
 public:

  // Starts watching `files` (index = local rank) from now. `on_miss` runs at
  // most once, for the first expired rank; watching then stops. `on_miss` may
  // destroy the watcher.
  HeartbeatWatcher(boost::asio::io_context& io, HeartbeatTimeouts timeouts,
                   std::vector<std::string> files, MissHandler on_miss);
  ~HeartbeatWatcher() override;
  HeartbeatWatcher(const HeartbeatWatcher&) = delete;
  HeartbeatWatcher& operator=(const HeartbeatWatcher&) = delete;

  // Stops watching `local_rank` (it exited).
  void Forget(int local_rank) override;

  // Whether any worker, watched or forgotten, has touched its file since the
  // watcher started (the files are stat'ed now): the group made progress.
  bool AnyTouched() const override;

 private:
  void Arm();
  void Check();

  boost::asio::steady_timer timer_;
  std::vector<std::string> files_;
  TimePoint started_;
  HeartbeatDeadlines deadlines_;
  MissHandler on_miss_;
};

// How long ago, by the wall clock read now, `path` was last modified (never
// negative: a future mtime reads as 0), or nullopt when it cannot be stat'ed
// (does not exist yet).
std::optional<Duration> FileAge(const std::string& path);

}  // namespace ctrun::launcher
