#include "logs_load_lines.h"

#include <cstdio>
#include <cstring>

namespace logs_load {
namespace {

constexpr char kStep[] = "] step ";
constexpr char kTime[] = " t ";
constexpr int kStepDigits = 7;
constexpr int kTimeChars = 14;  // "1765094400.123"

// Writes `v` as `width` decimal digits (zero-padded; the low digits kept) at `p`.
void PutDigits(char* p, long v, int width) {
  for (int i = width - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
}

}  // namespace

LineMaker::LineMaker(int rank) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "[rank %05d] step %0*d t %0*.3f loss 2.345678 lr 0.000300 grad_norm 0.912345 tok/s 123456\n", rank,
                kStepDigits, 0, kTimeChars, 0.0);
  line_ = buf;
}

void LineMaker::Append(std::string& out, long first, long n, double unix_s) const {
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%0*.3f", kTimeChars, unix_s);
  const size_t step_at = line_.find(kStep) + sizeof kStep - 1;
  const size_t time_at = step_at + kStepDigits + sizeof kTime - 1;
  const size_t start = out.size();
  out.resize(start + static_cast<size_t>(n) * line_.size());
  char* p = out.data() + start;
  for (long i = 0; i < n; ++i, p += line_.size()) {
    std::memcpy(p, line_.data(), line_.size());
    PutDigits(p + step_at, first + i, kStepDigits);
    std::memcpy(p + time_at, stamp, kTimeChars);
  }
}

}  // namespace logs_load
