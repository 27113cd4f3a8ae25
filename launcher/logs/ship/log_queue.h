// LogQueue: an agent's bounded queue of shared log lines (--share-logs)
// waiting to be shipped to the rendezvous server. Lines are queued in
// chunks, the whole lines one tee read from one worker stream, so that the
// agent spends no allocation per line. A chunk pushed while its stream's
// newest queued chunk (among the newest kMergeLookBack) is still small is
// appended to it (up to merge_bytes), so that a worker writing line by line
// makes few, large chunks (cheaper to send, parse and keep); the merged
// chunk keeps the time of its first lines, and a stream's lines stay in
// their order. Full (lines or bytes), the queue
// drops its oldest chunks and counts their lines; the count goes out with
// the next batch so that readers see the gap.
//
// Pure: no I/O, threads or clock. Thread model: not thread-safe; LogShipper
// guards it with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "rendezvous/logs/log_record.h"

namespace ctrun::launcher {

using rdzv::LogChunk;

struct LogQueueLimits {
  size_t max_lines = 65536;
  size_t max_bytes = 8 << 20;  // of text
  size_t merge_bytes = 64 << 10;  // the largest chunk merging makes (0: no merging)
};

// How many of the newest chunks Push looks through for the stream's own.
inline constexpr size_t kMergeLookBack = 64;

class LogQueue {
 public:
  explicit LogQueue(LogQueueLimits limits = {}) : limits_(limits) {}

  // Queues `chunk` (ignored when it holds no line; merged as said above
  // when that keeps within the bounds), dropping the oldest
  // chunks while a bound is exceeded (the newest chunk is kept even alone
  // over a bound).
  void Push(LogChunk chunk);
  // Takes the oldest chunks, up to `max_bytes` of text (at least one chunk
  // when any is queued), and the lines dropped since the last take (reset).
  std::vector<LogChunk> TakeBatch(size_t max_bytes, uint64_t* dropped);
  // Counts `n` lines lost after they were taken (a batch whose send failed)
  // as dropped, so the next batch reports them.
  void NoteLost(uint64_t n) {
    dropped_ += n;
    total_dropped_ += n;
  }

  size_t lines() const { return lines_; }
  size_t bytes() const { return bytes_; }
  uint64_t pending_dropped() const { return dropped_; }  // not yet taken
  uint64_t total_dropped() const { return total_dropped_; }
  bool empty() const { return chunks_.empty() && dropped_ == 0; }

 private:
  LogQueueLimits limits_;
  std::deque<LogChunk> chunks_;
  size_t lines_ = 0;
  size_t bytes_ = 0;
  uint64_t dropped_ = 0;
  uint64_t total_dropped_ = 0;
};

}  // namespace ctrun::launcher
