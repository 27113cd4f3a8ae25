// Fixed point: the exact, order-independent gradient sum of --ft-exact
// (exact_average.h, docs/fault-tolerance.md "Exact results").
//
// A bucket's values from S shards are scaled by one power of two, 2^shift,
// chosen from the largest magnitude among them (agreed by an exact maximum
// across the members), and rounded to int64. Integer addition is
// associative, so their sum is the same for any split of the shards among
// members and any order of the additions; the sum is read back as float
// once. The shift leaves the largest value 61 - ceil(log2 S) bits (float
// has 24), so the rounding costs less than float's own precision of the
// bucket's largest gradients, and S values at the largest magnitude still
// sum below 2^62.
//
// The scale can be agreed before the values exist: from the last committed
// step's largest magnitude (a hint, HintedShift) with kHintHeadroomBits of
// room; values that do not fit it (FitsFixedPoint) make the step agree on
// its own largest magnitude instead (exact_average.h).
//
// Pure arithmetic; free functions. Deterministic: the same inputs give the
// same bits on every machine with IEEE doubles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "base/result.h"

namespace ctrun::trainer::ft {

// The power of two for a bucket whose largest magnitude over all of a
// step's `shards` shards is `max_abs`. 0 for a bucket of zeros.
// InvalidArgument when max_abs is not finite (a NaN or infinite gradient
// has no fixed-point value) or shards < 1.
Result<int> FixedPointShift(float max_abs, int64_t shards);

// The headroom of a hinted shift: values up to 2^8 times the hint fit.
inline constexpr int kHintHeadroomBits = 8;

// The shift for values expected near `hint` (a last step's largest
// magnitude): FixedPointShift(hint * 2^kHintHeadroomBits); nullopt for a
// hint of 0 or one not finite (nothing but zeros fits then).
std::optional<int> HintedShift(float hint, int64_t shards);

// Whether values of largest magnitude `max_abs` may be added at `shift`
// (from FixedPointShift or HintedShift for the same `shards`): zeros
// always; others when their own shift is at least `shift`.
bool FitsFixedPoint(float max_abs, std::optional<int> shift, int64_t shards);

// Adds round(values[i] * 2^shift) into acc[i] (round half to even), for a
// shift from FixedPointShift whose max_abs bounds every |values[i]|.
void AddFixedPoint(const float* values, std::size_t count, int shift, int64_t* acc);

// out[i] = sums[i] * 2^-shift / shards, rounded once to float: the mean of
// the shards' values.
void ReadFixedPointMean(const int64_t* sums, std::size_t count, int shift, int64_t shards, float* out);

// The largest |values[i]| (0 for none; a NaN makes it NaN).
float MaxMagnitude(const float* values, std::size_t count);

}  // namespace ctrun::trainer::ft
