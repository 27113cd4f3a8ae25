// Fixed point (fixed_point.h): --ft-exact's sums do not depend on how the
// shards are split or in what order they are added, never overflow, and
// read back within float's precision of the true mean.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "trainer/ft/fixed_point.h"

namespace ft = ctrun::trainer::ft;

namespace {

// `shards` shards of `count` values over many magnitudes (some at the bucket's extremes).
std::vector<std::vector<float>> FixedPointShards(int shards, std::size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 3);
  std::vector<std::vector<float>> out(static_cast<std::size_t>(shards), std::vector<float>(count));
  for (auto& shard : out) {
    for (auto& v : shard) v = std::ldexp(mantissa(gen), exponent(gen));
  }
  return out;
}

float FixedPointMax(const std::vector<std::vector<float>>& shards) {
  float m = 0.0f;
  for (const auto& s : shards) m = std::max(m, ft::MaxMagnitude(s.data(), s.size()));
  return m;
}

// The mean as --ft-exact computes it: shards added in `order`, in `parts`
// partial sums (members) added together afterwards.
std::vector<float> FixedPointMean(const std::vector<std::vector<float>>& shards, const std::vector<int>& order,
                                  int parts) {
  const std::size_t count = shards[0].size();
  const int n = static_cast<int>(shards.size());
  auto shift = ft::FixedPointShift(FixedPointMax(shards), n);
  REQUIRE(shift.ok());
  std::vector<std::vector<int64_t>> partial(static_cast<std::size_t>(parts), std::vector<int64_t>(count, 0));
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto& s = shards[static_cast<std::size_t>(order[k])];
    ft::AddFixedPoint(s.data(), count, *shift, partial[k % static_cast<std::size_t>(parts)].data());
  }
  std::vector<int64_t> sums(count, 0);
  for (int p = parts - 1; p >= 0; --p) {
    for (std::size_t i = 0; i < count; ++i) sums[i] += partial[static_cast<std::size_t>(p)][i];
  }
  std::vector<float> mean(count);
  ft::ReadFixedPointMean(sums.data(), count, *shift, n, mean.data());
  return mean;
}

}  // namespace

TEST_CASE("FixedPoint: the mean has the same bits for any split of the shards and any order") {
  const auto shards = FixedPointShards(8, 257, 3);
  std::vector<int> order(8);
  std::iota(order.begin(), order.end(), 0);
  const std::vector<float> first = FixedPointMean(shards, order, 1);
  std::mt19937 gen(9);
  for (int parts : {1, 2, 3, 4, 8}) {
    for (int trial = 0; trial < 4; ++trial) {
      std::shuffle(order.begin(), order.end(), gen);
      const std::vector<float> again = FixedPointMean(shards, order, parts);
      INFO("parts " << parts << ", trial " << trial);
      CHECK(std::memcmp(again.data(), first.data(), first.size() * sizeof(float)) == 0);
    }
  }
  // Float addition in another order does differ on such values: what the
  // fixed point is for.
  std::vector<float> forward(257, 0.0f);
  std::vector<float> backward(257, 0.0f);
  for (int k = 0; k < 8; ++k) {
    for (std::size_t i = 0; i < 257; ++i) {
      forward[i] += shards[static_cast<std::size_t>(k)][i];
      backward[i] += shards[static_cast<std::size_t>(7 - k)][i];
    }
  }
  CHECK(std::memcmp(forward.data(), backward.data(), forward.size() * sizeof(float)) != 0);
}

TEST_CASE("FixedPoint: the mean is within float's precision of the true mean") {
  const auto shards = FixedPointShards(5, 1000, 4);
  std::vector<int> order = {0, 1, 2, 3, 4};
  const std::vector<float> mean = FixedPointMean(shards, order, 2);
  const double largest = FixedPointMax(shards);
  for (std::size_t i = 0; i < 1000; ++i) {
    double exact = 0;
    for (const auto& s : shards) exact += s[i];
    exact /= 5;
    // One float rounding of the result, plus the fixed point's 2^-58 of the largest value per shard.
    CHECK(std::fabs(mean[i] - exact) <= std::fabs(exact) * 0x1p-24 + largest * 0x1p-50);
  }
}

TEST_CASE("FixedPoint: shards all at the largest magnitude sum without overflow") {
  for (int n : {1, 2, 3, 64, 1000}) {
    const float big = std::numeric_limits<float>::max();
    const float tiny = std::numeric_limits<float>::denorm_min();
    for (float v : {big, -big, tiny, 1.0f, -0.75f}) {
      std::vector<std::vector<float>> shards(static_cast<std::size_t>(n), std::vector<float>{v, v / 2, 0.0f});
      std::vector<int> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      const std::vector<float> mean = FixedPointMean(shards, order, 1);
      INFO("n " << n << ", value " << v);
      CHECK(mean[0] == v);
      CHECK(mean[1] == v / 2);
      CHECK(mean[2] == 0.0f);
    }
  }
}

TEST_CASE("FixedPoint: a bucket of zeros, and values with no fixed-point value") {
  auto zero = ft::FixedPointShift(0.0f, 4);
  REQUIRE(zero.ok());
  CHECK(*zero == 0);
  auto inf = ft::FixedPointShift(std::numeric_limits<float>::infinity(), 4);
  REQUIRE_FALSE(inf.ok());
  CHECK(inf.status().message() == "a gradient is not finite (inf): --ft-exact adds finite gradients only");
  const float with_nan[] = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  CHECK(std::isnan(ft::MaxMagnitude(with_nan, 3)));
  CHECK_FALSE(ft::FixedPointShift(ft::MaxMagnitude(with_nan, 3), 4).ok());
  CHECK_FALSE(ft::FixedPointShift(1.0f, 0).ok());
}

TEST_CASE("FixedPoint: a hinted shift leaves 2^8 of room, and what fits it adds as the exact shift would") {
  CHECK_FALSE(ft::HintedShift(0.0f, 4));
  CHECK_FALSE(ft::HintedShift(std::numeric_limits<float>::infinity(), 4));
  CHECK_FALSE(ft::HintedShift(std::numeric_limits<float>::max(), 4));  // no room above it
  const auto shift = ft::HintedShift(0.5f, 4);
  REQUIRE(shift);
  CHECK(*shift == *ft::FixedPointShift(128.0f, 4));
  CHECK(ft::FitsFixedPoint(0.0f, std::nullopt, 4));
  CHECK_FALSE(ft::FitsFixedPoint(1e-30f, std::nullopt, 4));
  CHECK(ft::FitsFixedPoint(100.0f, shift, 4));
  CHECK(ft::FitsFixedPoint(1e-30f, shift, 4));
  CHECK_FALSE(ft::FitsFixedPoint(256.0f, shift, 4));
  // Four shards at the edge of the room sum without overflow, and read back exactly.
  const std::vector<float> edge = {std::nextafter(256.0f, 0.0f), -std::nextafter(256.0f, 0.0f), 3.0f};
  REQUIRE(ft::FitsFixedPoint(ft::MaxMagnitude(edge.data(), edge.size()), shift, 4));
  std::vector<int64_t> acc(3, 0);
  for (int k = 0; k < 4; ++k) ft::AddFixedPoint(edge.data(), edge.size(), *shift, acc.data());
  std::vector<float> mean(3);
  ft::ReadFixedPointMean(acc.data(), 3, *shift, 4, mean.data());
  CHECK(mean == edge);
}
