#include "trainer/ft/fixed_point.h"

#include <cmath>
#include <string>

namespace ctrun::trainer::ft {

Result<int> FixedPointShift(float max_abs, int64_t shards) {
  if (shards < 1) return Status::InvalidArgument("fixed point over " + std::to_string(shards) + " shards");
  if (!std::isfinite(max_abs)) {
    return Status::InvalidArgument("a gradient is not finite (" + std::to_string(max_abs) +
                                   "): --ft-exact adds finite gradients only");
  }
  if (max_abs == 0.0f) return 0;
  int exponent = 0;
  std::frexp(static_cast<double>(max_abs), &exponent);  // max_abs < 2^exponent
  int shard_bits = 0;
  while ((int64_t{1} << shard_bits) < shards) ++shard_bits;
  // |round(v * 2^shift)| <= 2^(61 - shard_bits), and S of them sum below 2^62.
  return 61 - shard_bits - exponent;
}

void AddFixedPoint(const float* values, std::size_t count, int shift, int64_t* acc) {
  for (std::size_t i = 0; i < count; ++i) {
    acc[i] += std::llrint(std::ldexp(static_cast<double>(values[i]), shift));
  }
}

void ReadFixedPointMean(const int64_t* sums, std::size_t count, int shift, int64_t shards, float* out) {
  const double divisor = static_cast<double>(shards);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(std::ldexp(static_cast<double>(sums[i]), -shift) / divisor);
  }
}

float MaxMagnitude(const float* values, std::size_t count) {
  float out = 0.0f;
  for (std::size_t i = 0; i < count; ++i) {
    const float a = std::fabs(values[i]);
    if (std::isnan(a)) return a;
    if (a > out) out = a;
  }
  return out;
}

}  // namespace ctrun::trainer::ft
