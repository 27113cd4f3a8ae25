#include "launcher/logs/log_queue.h"

#include <utility>

namespace ctrun::launcher {

void LogQueue::Push(LogChunk chunk) {
  if (chunk.lines == 0) return;
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
