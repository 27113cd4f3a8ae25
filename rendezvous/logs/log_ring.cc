#include "rendezvous/logs/log_ring.h"

#include <algorithm>
#include <utility>

namespace ctrun::rdzv {

void LogRing::Append(LogRecord line) {
  if (line.text.size() > kMaxLogLineBytes) line.text.resize(kMaxLogLineBytes);
  line.seq = next_seq_++;
  bytes_ += ChargedBytes(line);
  lines_.push_back(std::move(line));
  while (!lines_.empty() && (bytes_ > limits_.max_bytes || lines_.size() > limits_.max_lines)) {
    bytes_ -= ChargedBytes(lines_.front());
    lines_.pop_front();
    ++dropped_;
  }
}

LogRead LogRing::Read(uint64_t from, const LogFilter& filter, size_t max_bytes) const {
  LogRead out;
  from = std::max<uint64_t>(from, 1);
  out.next = from;
  // Seqs are increasing: the first line at or after `from`.
  auto it = std::lower_bound(lines_.begin(), lines_.end(), from,
                             [](const LogRecord& r, uint64_t seq) { return r.seq < seq; });
  size_t bytes = 0;
  for (; it != lines_.end(); ++it) {
    if (it->seq > out.next) out.dropped += it->seq - out.next;  // a gap: dropped here or by the node
    out.next = it->seq + 1;
    if (!filter.Matches(*it)) continue;
    bytes += ChargedBytes(*it);
    out.lines.push_back(*it);
    if (bytes >= max_bytes) break;
  }
  if (it == lines_.end() && next_seq_ > out.next) {  // numbers after the last kept line
    out.dropped += next_seq_ - out.next;
    out.next = next_seq_;
  }
  return out;
}

}  // namespace ctrun::rdzv
