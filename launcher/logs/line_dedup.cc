#include "launcher/logs/line_dedup.h"

#include <algorithm>

namespace ctrun::launcher {

std::string FormatRankRanges(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(ranks[i]);
    if (j > i) s += '-' + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

void LineDedup::Add(int rank, std::string_view prefix, std::string_view line, TimePoint now, std::string* out) {
  Flush(now, out);
  uint64_t& last = last_seq_[rank];
  const std::string text(line);
  if (auto it = index_.find(text); it != index_.end()) {
    for (uint64_t seq : it->second) {
      if (seq <= last) continue;
      held_[seq - held_.front().seq].ranks.push_back(rank);
      last = seq;
      return;
    }
  }
  const size_t cost = text.size() + prefix.size();
  if (cost > limits_.max_bytes) {  // too big to hold: out now, after the older lines
    FlushAll(out);
    Emit(Held{0, now, &text, std::string(prefix), {rank}}, out);
    return;
  }
  while (!held_.empty() && (held_.size() >= limits_.max_lines || bytes_ + cost > limits_.max_bytes)) {
    PopOldest(out);
  }
  auto [it, inserted] = index_.try_emplace(text);
  it->second.push_back(next_seq_);
  held_.push_back(Held{next_seq_, now, &it->first, std::string(prefix), {rank}});
  last = next_seq_++;
  bytes_ += cost;
}

void LineDedup::Flush(TimePoint now, std::string* out) {
  while (!held_.empty() && held_.front().first_seen + limits_.window <= now) PopOldest(out);
}

void LineDedup::FlushAll(std::string* out) {
  while (!held_.empty()) PopOldest(out);
}

std::optional<TimePoint> LineDedup::NextDeadline() const {
  if (held_.empty()) return std::nullopt;
  return held_.front().first_seen + limits_.window;
}

void LineDedup::PopOldest(std::string* out) {
  const Held& h = held_.front();
  Emit(h, out);
  bytes_ -= Cost(h);
  auto it = index_.find(*h.text);
  it->second.erase(it->second.begin());  // the oldest of its text is the oldest held
  if (it->second.empty()) {
    held_.pop_front();  // before the key its text points to goes
    index_.erase(it);
  } else {
    held_.pop_front();
  }
}

void LineDedup::Emit(const Held& h, std::string* out) const {
  if (h.ranks.size() == 1) {
    out->append(h.prefix);
  } else {
    std::vector<int> sorted = h.ranks;
    std::sort(sorted.begin(), sorted.end());
    out->append("[ranks ").append(FormatRankRanges(sorted)).append("]: ");
  }
  out->append(*h.text);
}

}  // namespace ctrun::launcher
