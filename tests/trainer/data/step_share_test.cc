// StepShare: a step's samples depend on the step alone, divided among the
// ranks alive.
#include "trainer/data/step_share.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace ct = ctrun::trainer;

namespace {

// Every share of step `step`, in order.
std::vector<ct::SampleRange> Shares(int64_t step, int64_t batch, int shares) {
  std::vector<ct::SampleRange> out;
  for (int s = 0; s < shares; ++s) {
    auto r = ct::StepShare(step, batch, s, shares);
    REQUIRE(r.ok());
    out.push_back(*r);
  }
  return out;
}

}  // namespace

TEST_CASE("StepShare: the shares tile the step's positions, the first ones one longer") {
  for (int shares : {1, 2, 3, 5, 7, 64}) {
    const auto parts = Shares(4, 10, shares);
    int64_t next = 40;
    for (size_t i = 0; i < parts.size(); ++i) {
      CHECK(parts[i].begin == next);
      const int64_t len = parts[i].end - parts[i].begin;
      CHECK(len == 10 / shares + (static_cast<int64_t>(i) < 10 % shares ? 1 : 0));
      next = parts[i].end;
    }
    CHECK(next == 50);
  }
}

TEST_CASE("StepShare: a step run again under a smaller quorum covers the same positions") {
  // 3 groups x 2 ranks train step 7; group 1 dies; the step is discarded and
  // run again by 2 groups x 2 ranks: the same 48 positions, none lost.
  const auto before = Shares(7, 48, 6);
  const auto after = Shares(7, 48, 4);
  CHECK(before.front().begin == after.front().begin);
  CHECK(before.back().end == after.back().end);
  CHECK(after[1] == ct::SampleRange{.begin = 7 * 48 + 12, .end = 7 * 48 + 24});
}

TEST_CASE("StepShare: bad inputs are one line; positions past 64 bits are refused") {
  CHECK(ct::StepShare(0, 8, 2, 2).status().message() ==
        "StepShare: step 0, global batch 8, share 2 of 2 is out of range");
  CHECK(!ct::StepShare(-1, 8, 0, 1).ok());
  CHECK(!ct::StepShare(0, 0, 0, 1).ok());
  CHECK(!ct::StepShare(std::numeric_limits<int64_t>::max() / 2, 4, 0, 1).ok());
}

TEST_CASE("PlaceOf: epoch and offset of a stream position") {
  CHECK(ct::PlaceOf(0, 10) == ct::StreamPlace{.epoch = 0, .offset = 0});
  CHECK(ct::PlaceOf(25, 10) == ct::StreamPlace{.epoch = 2, .offset = 5});
}
