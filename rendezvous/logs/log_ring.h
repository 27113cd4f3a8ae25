// LogRing: one run's shared log on the rendezvous server: a bounded ring of
// chunks (the whole lines one agent read from one worker stream at one
// time, as they arrived), every line numbered (seq, from 1; a chunk of n
// lines takes n consecutive numbers). When a bound is reached the oldest
// whole chunks are dropped; lines a node reports it dropped itself take
// numbers too (NoteDropped), so a reader sees every loss as a gap in the
// numbers and can count it (Read). Reads hand out single lines (Read) or
// slices of the chunks (ReadSlices): a chunk is sliced where a cursor falls
// inside it.
//
// A line longer than kMaxLogLineBytes is cut when stored. The node label is
// shared by every chunk of one stream (one string per stream, not per line).
//
// Pure: no I/O, threads or clock. Thread model: not thread-safe; the owner
// serializes every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/logs/log_record.h"

namespace ctrun::rdzv {

struct LogRingLimits {
  size_t max_bytes = 8 << 20;   // ChargedBytes summed over the chunks kept
  size_t max_lines = 65536;
};

// The largest text Append hands back for reuse (a bound on what a caller's
// spares hold).
inline constexpr size_t kMaxSpareTextBytes = 64 << 10;

// What the ring keeps of a chunk.
struct LogRingChunk {
  int32_t rank = 0;        // global rank of the worker
  int32_t local_rank = 0;
  bool is_stderr = false;
  double unix_s = 0;       // when the agent read the lines
  std::shared_ptr<const std::string> node;  // the sending node's label; null: ""
  std::string text;        // whole lines, each ending in '\n', each <= kMaxLogLineBytes + 1
  // Set by the ring: the first line's number and how many lines.
  uint64_t first_seq = 0;
  size_t lines = 0;
};

// The bytes a stored chunk is charged for: its text plus a fixed overhead
// (the node label is shared, not charged).
inline size_t ChargedBytes(const LogRingChunk& c) { return c.text.size() + 64; }

// Which lines a reader wants; every set field must match.
struct LogFilter {
  std::optional<int32_t> rank;
  // "" any; a node's label ("vm#7260": its address, '#', its agent's pid),
  // or an address alone ("vm": every agent there).
  std::string node;
  double since_unix_s = 0; // lines read at or after this time (0 any)

  bool Matches(int32_t line_rank, const std::string& line_node, double unix_s) const {
    return (!rank || line_rank == *rank) && NodeMatches(line_node) && unix_s >= since_unix_s;
  }
  bool NodeMatches(const std::string& line_node) const {
    return node.empty() || line_node == node ||
           (line_node.size() > node.size() && line_node.compare(0, node.size(), node) == 0 &&
            line_node[node.size()] == '#');
  }
  bool Matches(const LogRecord& r) const { return Matches(r.rank, r.node, r.unix_s); }
};

// What one Read returns.
struct LogRead {
  std::vector<LogRecord> lines;  // matching lines, in seq order
  uint64_t dropped = 0;          // lines numbered in the range read that no longer exist
  uint64_t next = 1;             // the cursor to read from next
};

// Some consecutive lines of one kept chunk, as ReadSlices hands them out:
// a view into the ring (valid until the ring's next Append).
struct LogSlice {
  const LogRingChunk* chunk = nullptr;  // its rank, node, time
  uint64_t first_seq = 0;               // the number of the slice's first line
  std::string_view text;                // whole lines, each ending in '\n'
  size_t lines = 0;
};

// Where a ReadSlices ended: lines numbered in its range that no longer
// exist, and the cursor to read from next.
struct LogCursor {
  uint64_t dropped = 0;
  uint64_t next = 1;
};

class LogRing {
 public:
  explicit LogRing(LogRingLimits limits = {}) : limits_(limits) {}

  // Numbers the lines of `chunk` (its first_seq and lines are set here;
  // text without a final '\n' gets one, lines over kMaxLogLineBytes are
  // cut) and keeps it, dropping the oldest chunks while a bound is exceeded
  // (the new one too, if alone it exceeds one). Returns its line count; an
  // empty text is ignored (0).
  size_t Append(LogRingChunk chunk);
  // The same, handing the text of each chunk it drops to `spare` (when
  // spare->size() < max_spare and its capacity is at most
  // kMaxSpareTextBytes; else it is freed): a caller that fills its
  // next chunk's text into one of them reuses its memory, so a full ring
  // costs no allocation and no free per chunk.
  size_t Append(LogRingChunk chunk, std::vector<std::string>* spare, size_t max_spare);
  // One line (its text without '\n'; its seq and node are ignored), as a
  // chunk of one line labelled r.node.
  void Append(const LogRecord& line);
  // `n` lines a node dropped before sending: they take numbers, kept by no
  // one, so readers count them as dropped.
  void NoteDropped(uint64_t n) { next_seq_ += n; }
  // Drops the oldest chunks until bytes() <= max_bytes (counted as dropped,
  // as a full ring drops them; their texts go to `spare` as Append's).
  void ShrinkTo(size_t max_bytes, std::vector<std::string>* spare = nullptr, size_t max_spare = 0);

  // Up to `max_bytes` (ChargedBytes of LogRecord; at least one line when one
  // matches) of the matching lines numbered `from` or later. A cursor below
  // the oldest kept line counts the lines in between as dropped.
  LogRead Read(uint64_t from, const LogFilter& filter, size_t max_bytes) const;
  // What Read reads, with the same budget (each line charged as its
  // LogRecord would be: ChargedBytes), handed to `f` in slices of the kept
  // chunks, in seq order, with no copy and no allocation: the cost is per
  // chunk, not per line, unless the budget ends inside a chunk.
  LogCursor ReadSlices(uint64_t from, const LogFilter& filter, size_t max_bytes,
                       const std::function<void(const LogSlice&)>& f) const;

  uint64_t next_seq() const { return next_seq_; }   // the number the next line gets
  uint64_t dropped() const { return dropped_; }     // lines this ring dropped
  size_t bytes() const { return bytes_; }
  size_t lines() const { return lines_; }           // lines kept
  size_t chunks() const { return chunks_.size(); }

 private:
  // Drops the oldest chunks while bytes_ > max_bytes or lines_ > max_lines.
  void DropOldest(size_t max_bytes, size_t max_lines, std::vector<std::string>* spare, size_t max_spare);

  LogRingLimits limits_;
  std::deque<LogRingChunk> chunks_;
  size_t bytes_ = 0;
  size_t lines_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t dropped_ = 0;
};

}  // namespace ctrun::rdzv
