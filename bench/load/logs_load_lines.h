// logs_load's worker lines: what a training loop prints, ~100 bytes each,
//   "[rank 00042] step 0000017 t 1765094400.123 loss 2.345678 lr 0.000300 grad_norm 0.912345 tok/s 123456"
// with the rank, the rank's line number (from 0) and the wall time the
// batch was sent, so that a reader can check the order per rank and measure
// its lag from any line it sees. Made by patching a per-rank template in
// place: no formatting and no allocation per line.
//
// Plain values; each maker is used by one thread.
#pragma once

#include <cstddef>
#include <string>

namespace logs_load {

class LineMaker {
 public:
  explicit LineMaker(int rank);

  // Appends lines `first`.. `first + n - 1` of this rank, each ending in
  // '\n', stamped with `unix_s` (to the millisecond).
  void Append(std::string& out, long first, long n, double unix_s) const;

  size_t line_bytes() const { return line_.size(); }  // with its '\n'

 private:
  std::string line_;  // the template
};

}  // namespace logs_load
