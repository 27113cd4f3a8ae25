// LogRing: one run's shared log on the rendezvous server: a bounded ring of
// lines in the order they arrived, each numbered (seq, from 1). When a bound
// is reached the oldest lines are dropped; lines a node reports it dropped
// itself take numbers too (NoteDropped), so a reader sees every loss as a gap
// in the numbers and can count it (Read).
//
// Pure: no I/O, threads or clock. Thread model: not thread-safe; the owner
// serializes every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/logs/log_record.h"

namespace ctrun::rdzv {

struct LogRingLimits {
  size_t max_bytes = 8 << 20;   // ChargedBytes summed over the lines kept
  size_t max_lines = 65536;
};

// Which lines a reader wants; every set field must match.
struct LogFilter {
  std::optional<int32_t> rank;
  std::string node;        // "" any
  double since_unix_s = 0; // lines read at or after this time (0 any)

  bool Matches(const LogRecord& r) const {
    return (!rank || r.rank == *rank) && (node.empty() || r.node == node) && r.unix_s >= since_unix_s;
  }
};

// What one Read returns.
struct LogRead {
  std::vector<LogRecord> lines;  // matching lines, in seq order
  uint64_t dropped = 0;          // lines numbered in the range read that no longer exist
  uint64_t next = 1;             // the cursor to read from next
};

class LogRing {
 public:
  explicit LogRing(LogRingLimits limits = {}) : limits_(limits) {}

  // Numbers `line` (its seq is set here; its text is cut to
  // kMaxLogLineBytes) and keeps it, dropping the oldest lines while a bound
  // is exceeded.
  void Append(LogRecord line);
  // `n` lines a node dropped before sending: they take numbers, kept by no
  // one, so readers count them as dropped.
  void NoteDropped(uint64_t n) { next_seq_ += n; }

  // Up to `max_bytes` (ChargedBytes; at least one line when one matches)
  // of the matching lines numbered `from` or later. A cursor below the
  // oldest kept line counts the lines in between as dropped.
  LogRead Read(uint64_t from, const LogFilter& filter, size_t max_bytes) const;

  uint64_t next_seq() const { return next_seq_; }   // the number the next line gets
  uint64_t dropped() const { return dropped_; }     // lines this ring dropped
  size_t bytes() const { return bytes_; }
  size_t lines() const { return lines_.size(); }

 private:
  LogRingLimits limits_;
  std::deque<LogRecord> lines_;
  size_t bytes_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t dropped_ = 0;
};

}  // namespace ctrun::rdzv
