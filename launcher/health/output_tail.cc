#include "launcher/health/output_tail.h"

namespace ctrun::launcher {

void OutputTail::Append(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n') {
      EndLine();
    } else if (partial_.size() < max_line_bytes_) {
      partial_.push_back(c);
    } else {
      partial_cut_ = true;
    }
  }
}

void OutputTail::EndLine() {
  if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
  if (partial_cut_) partial_ += "...";
  lines_.push_back(std::move(partial_));
  partial_.clear();
  partial_cut_ = false;
  while (lines_.size() > max_lines_) lines_.pop_front();
}

std::vector<std::string> OutputTail::Lines() const {
  std::vector<std::string> out(lines_.begin(), lines_.end());
  if (!partial_.empty()) {
    out.push_back(partial_cut_ ? partial_ + "..." : partial_);
    if (out.size() > max_lines_) out.erase(out.begin());
  }
  return out;
}

}  // namespace ctrun::launcher
