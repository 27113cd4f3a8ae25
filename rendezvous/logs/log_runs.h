// LogRuns: the shared logs of every run a rendezvous server holds, one
// LogRing each, at most `max_runs` of them: a new run's first lines evict
// the ring of the run that received lines least recently. Each ring gets an
// epoch number when it is made, so a reader can tell a ring made again
// (after an eviction or Forget) from the one it was reading.
//
// Memory: each ring holds at most ring.max_bytes, and the rings together at
// most max_total_bytes (ChargedBytes): when an Append takes them past it,
// the largest ring drops its oldest chunks until they are within it again
// (so one busy run may use up to ring.max_bytes alone, and several busy runs
// share max_total_bytes). The bound counts what goes through Append: a
// ring filled by its own Append is not counted (its bytes leave the count,
// never below 0, when it is dropped).
//
// Pure: no I/O, threads or clock. Thread model: not thread-safe; the owner
// serializes every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rendezvous/logs/log_ring.h"

namespace ctrun::rdzv {

struct LogRunsLimits {
  LogRingLimits ring;
  size_t max_runs = 64;
  size_t max_total_bytes = size_t{256} << 20;  // all rings' bytes() together
};

class LogRuns {
 public:
  explicit LogRuns(LogRunsLimits limits = {}) : limits_(limits) {}

  // The ring of `run_id`, made (evicting another when max_runs are held)
  // when there is none. The reference is valid until the next call that
  // may make or drop a ring (Open, Forget). `evicted` gets the run whose
  // ring was dropped to make room, if any.
  LogRing& Open(const std::string& run_id, std::string* evicted = nullptr);
  // The ring of `run_id`, or null. Valid as Open's.
  LogRing* Find(const std::string& run_id);
  const LogRing* Find(const std::string& run_id) const;
  // The epoch of `run_id`'s ring (0: none).
  uint64_t Epoch(const std::string& run_id) const;
  // Appends `chunk` to `ring` (one of this object's, from Open or Find) as
  // LogRing::Append does, then keeps every ring within max_total_bytes.
  // Returns the chunk's line count. The text of every chunk dropped goes to
  // `spare` as LogRing::Append's.
  size_t Append(LogRing& ring, LogRingChunk chunk, std::vector<std::string>* spare = nullptr, size_t max_spare = 0);
  // The bytes() of every ring together (<= max_total_bytes after each Append).
  size_t total_bytes() const { return total_bytes_; }
  // Marks `run_id` as the run that received lines last (eviction order).
  void Touch(const std::string& run_id);
  // Drops `run_id`'s ring; false when there was none.
  bool Forget(const std::string& run_id);
  std::vector<std::string> RunIds() const;
  size_t size() const { return runs_.size(); }

 private:
  struct Run {
    LogRing ring;
    uint64_t epoch = 0;
    uint64_t last_used = 0;
  };
  LogRunsLimits limits_;
  std::map<std::string, Run> runs_;
  uint64_t next_epoch_ = 1;
  uint64_t clock_ = 0;  // a counter, for eviction order
  size_t total_bytes_ = 0;
};

}  // namespace ctrun::rdzv
