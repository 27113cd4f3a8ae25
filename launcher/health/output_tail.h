// OutputTail: the last lines of a stream of bytes, kept as they arrive.
//
// A health check may print a lot; the report keeps its end, where the
// reason usually is. Pure; plain copyable value.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace ctrun::launcher {

class OutputTail {
 public:
  // Keeps at most `max_lines` lines, each cut to `max_line_bytes` bytes
  // (with "..." appended when cut).
  explicit OutputTail(size_t max_lines = 20, size_t max_line_bytes = 400)
      : max_lines_(max_lines), max_line_bytes_(max_line_bytes) {}

  // Appends `bytes` (any split: a line may arrive in pieces). "\r\n" ends a
  // line like "\n".
  void Append(std::string_view bytes);

  // The kept lines, oldest first, the unterminated last line included when
  // it is not empty. Blank lines are kept.
  std::vector<std::string> Lines() const;

 private:
  void EndLine();

  size_t max_lines_;
  size_t max_line_bytes_;
  std::deque<std::string> lines_;
  std::string partial_;
  bool partial_cut_ = false;
};

}  // namespace ctrun::launcher
