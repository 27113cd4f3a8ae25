// LineDedup: --dedup-logs' collapsing of identical console lines, pure (no
// I/O, no clock: the caller passes `now`). Lines from the local ranks come
// in; console lines go out. A line is held for a short window; the ranks
// that print the same text within it are gathered, and when the window
// closes the line is written once as "[ranks 0-2,5]: text". A line that only
// one rank printed is written as that rank passed it (its usual prefix).
//
// Order: a rank's own lines leave in the order it printed them. A line may
// only join a held line that came after the rank's last held one; otherwise
// it is held on its own. Held lines leave oldest first.
//
// Memory: at most Limits::max_lines held lines and Limits::max_bytes of
// their text; a line that would pass either cap first sends the oldest out.
//
// Ownership: owns copies of the held lines. Thread model: one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"

namespace ctrun::launcher {

// "0-2,5" for {0, 1, 2, 5}; `ranks` sorted, without repeats.
std::string FormatRankRanges(const std::vector<int>& ranks);

class LineDedup {
 public:
  struct Limits {
    Duration window = std::chrono::milliseconds(100);
    size_t max_lines = 1024;        // held distinct lines
    size_t max_bytes = 1 << 20;     // their text (prefixes and '\n' included)
  };

  LineDedup() = default;
  explicit LineDedup(Limits limits) : limits_(limits) {}

  // One whole line (its '\n' included, if any) that local rank `rank`
  // printed; `prefix` is what the console shows before it today ("" for an
  // unprefixed stream). Appends to *out the lines whose window has closed
  // by `now`, and the oldest held ones that the caps push out.
  void Add(int rank, std::string_view prefix, std::string_view line, TimePoint now, std::string* out);
  // Appends the lines whose window has closed by `now`.
  void Flush(TimePoint now, std::string* out);
  // Appends every held line (the streams have ended).
  void FlushAll(std::string* out);
  // When the oldest held line's window closes; nullopt when none is held.
  std::optional<TimePoint> NextDeadline() const;
  bool empty() const { return held_.empty(); }

 private:
  struct Held {
    uint64_t seq;
    TimePoint first_seen;
    const std::string* text;  // the key in index_ (stable: unordered_map nodes)
    std::string prefix;       // the first rank's usual prefix
    std::vector<int> ranks;   // in arrival order, no repeats
  };

  void PopOldest(std::string* out);
  void Emit(const Held& h, std::string* out) const;
  size_t Cost(const Held& h) const { return h.text->size() + h.prefix.size(); }

  Limits limits_;
  std::deque<Held> held_;  // oldest first; held_[i].seq == next_seq_ - held_.size() + i
  std::unordered_map<std::string, std::vector<uint64_t>> index_;  // text -> held seqs, ascending
  std::unordered_map<int, uint64_t> last_seq_;                    // rank -> seq of its last line
  uint64_t next_seq_ = 1;
  size_t bytes_ = 0;
};

}  // namespace ctrun::launcher
