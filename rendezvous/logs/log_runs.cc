#include "rendezvous/logs/log_runs.h"

#include <algorithm>

namespace ctrun::rdzv {

LogRing& LogRuns::Open(const std::string& run_id, std::string* evicted) {
  if (auto it = runs_.find(run_id); it != runs_.end()) return it->second.ring;
  if (runs_.size() >= limits_.max_runs && !runs_.empty()) {
    auto oldest = runs_.begin();
    for (auto it = runs_.begin(); it != runs_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    if (evicted) *evicted = oldest->first;
    total_bytes_ -= std::min(total_bytes_, oldest->second.ring.bytes());
    runs_.erase(oldest);
  }
  Run& run = runs_[run_id];
  run.ring = LogRing(limits_.ring);
  run.epoch = next_epoch_++;
  run.last_used = ++clock_;
  return run.ring;
}

LogRing* LogRuns::Find(const std::string& run_id) {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : &it->second.ring;
}

const LogRing* LogRuns::Find(const std::string& run_id) const {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : &it->second.ring;
}

uint64_t LogRuns::Epoch(const std::string& run_id) const {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? 0 : it->second.epoch;
}

void LogRuns::Touch(const std::string& run_id) {
  if (auto it = runs_.find(run_id); it != runs_.end()) it->second.last_used = ++clock_;
}

bool LogRuns::Forget(const std::string& run_id) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return false;
  total_bytes_ -= std::min(total_bytes_, it->second.ring.bytes());
  runs_.erase(it);
  return true;
}

size_t LogRuns::Append(LogRing& ring, LogRingChunk chunk, std::vector<std::string>* spare, size_t max_spare) {
  const size_t before = ring.bytes();
  const size_t n = ring.Append(std::move(chunk), spare, max_spare);
  total_bytes_ = total_bytes_ - before + ring.bytes();
  while (total_bytes_ > limits_.max_total_bytes) {
    LogRing* largest = nullptr;
    for (auto& [id, run] : runs_) {
      if (!largest || run.ring.bytes() > largest->bytes()) largest = &run.ring;
    }
    const size_t over = total_bytes_ - limits_.max_total_bytes;
    const size_t had = largest->bytes();
    largest->ShrinkTo(had > over ? had - over : 0, spare, max_spare);
    total_bytes_ -= had - largest->bytes();
  }
  return n;
}

std::vector<std::string> LogRuns::RunIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, run] : runs_) ids.push_back(id);
  return ids;
}

}  // namespace ctrun::rdzv
