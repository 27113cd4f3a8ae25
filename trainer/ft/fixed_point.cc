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

std::optional<int> HintedShift(float hint, int64_t shards) {
  if (!(hint > 0.0f) || !std::isfinite(hint)) return std::nullopt;
  const float room = std::ldexp(hint, kHintHeadroomBits);
  if (!std::isfinite(room)) return std::nullopt;
  auto shift = FixedPointShift(room, shards);
  if (!shift.ok()) return std::nullopt;
  return *shift;
}

bool FitsFixedPoint(float max_abs, std::optional<int> shift, int64_t shards) {
  if (max_abs == 0.0f) return true;
  if (!shift) return false;
  auto own = FixedPointShift(max_abs, shards);
  return own.ok() && *own >= *shift;
}

// Scaling by 2^shift is exact in double for every shift FixedPointShift
// returns (|shift| < 300), so a multiplication does what ldexp would.
// llrint rounds half to even (the default rounding mode); this file is
// built with -fno-math-errno so it becomes one instruction.
void AddFixedPoint(const float* values, std::size_t count, int shift, int64_t* acc) {
  const double scale = std::ldexp(1.0, shift);
  for (std::size_t i = 0; i < count; ++i) acc[i] += std::llrint(static_cast<double>(values[i]) * scale);
}

void ReadFixedPointMean(const int64_t* sums, std::size_t count, int shift, int64_t shards, float* out) {
  const double unscale = std::ldexp(1.0, -shift);
  const double divisor = static_cast<double>(shards);
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(static_cast<double>(sums[i]) * unscale / divisor);
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
