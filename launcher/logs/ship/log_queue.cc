#include "launcher/logs/ship/log_queue.h"

#include <algorithm>
#include <utility>

namespace ctrun::launcher {

void LogQueue::Push(LogChunk chunk) {
  if (chunk.lines == 0) return;
  if (limits_.merge_bytes > 0 && lines_ + chunk.lines <= limits_.max_lines &&
      bytes_ + chunk.text.size() <= limits_.max_bytes) {
    const size_t look = std::min(chunks_.size(), kMergeLookBack);
    for (size_t i = 1; i <= look; ++i) {
      LogChunk& last = chunks_[chunks_.size() - i];
      if (last.rank != chunk.rank || last.local_rank != chunk.local_rank || last.is_stderr != chunk.is_stderr) continue;
      if (last.text.size() + chunk.text.size() > limits_.merge_bytes) break;  // full: a new chunk
      last.text.append(chunk.text);
      last.lines += chunk.lines;
      lines_ += chunk.lines;
      bytes_ += chunk.text.size();
      return;
    }
  }
  lines_ += chunk.lines;
  bytes_ += chunk.text.size();
  chunks_.push_back(std::move(chunk));
  while (chunks_.size() > 1 && (bytes_ > limits_.max_bytes || lines_ > limits_.max_lines)) {
    const LogChunk& old = chunks_.front();
    lines_ -= old.lines;
    bytes_ -= old.text.size();
    dropped_ += old.lines;
    total_dropped_ += old.lines;
    chunks_.pop_front();
  }
}

std::vector<LogChunk> LogQueue::TakeBatch(size_t max_bytes, uint64_t* dropped) {
  std::vector<LogChunk> batch;
  size_t bytes = 0;
  while (!chunks_.empty()) {
    const size_t b = chunks_.front().text.size();
    if (!batch.empty() && bytes + b > max_bytes) break;
    bytes += b;
    bytes_ -= b;
    lines_ -= chunks_.front().lines;
    batch.push_back(std::move(chunks_.front()));
    chunks_.pop_front();
  }
  if (dropped) *dropped = std::exchange(dropped_, 0);
  return batch;
}

}  // namespace ctrun::launcher
