// StepPace (step_pace.h): the ring's stall times from a worker's step times.
#include <catch2/catch.hpp>

#include <chrono>

#include "trainer/ft/step_pace.h"

namespace ft = ctrun::trainer::ft;
using std::chrono::milliseconds;

TEST_CASE("StepPace: the ceiling until enough steps were timed, then twice the pace (four times when the quorum changed)") {
  ft::StepPace pace(milliseconds(30000));
  CHECK(pace.Steady() == milliseconds(30000));
  CHECK(pace.Changed() == milliseconds(30000));
  for (size_t i = 1; i < ft::kMinPaceSteps; ++i) pace.Record(milliseconds(100));
  CHECK(!pace.Pace());
  CHECK(pace.Steady() == milliseconds(30000));
  pace.Record(milliseconds(100));
  REQUIRE(pace.Pace() == std::chrono::steady_clock::duration(milliseconds(100)));
  CHECK(pace.Steady() == milliseconds(200));
  CHECK(pace.Changed() == ft::kMinChangedStall);  // 400 ms is below the floor
  CHECK(pace.Healing() == milliseconds(30000));
  for (size_t i = 0; i < ft::kPaceWindow; ++i) pace.Record(milliseconds(400));  // the old steps fall out
  CHECK(pace.Steady() == milliseconds(800));
  CHECK(pace.Changed() == milliseconds(1600));
}

TEST_CASE("StepPace: steps held up by a slow peer for most of the window do not become the pace") {
  ft::StepPace pace(milliseconds(30000));
  for (size_t i = 0; i < ft::kPaceWindow; ++i) pace.Record(milliseconds(30));
  for (size_t i = 0; i < ft::kPaceWindow * 7 / 10; ++i) pace.Record(milliseconds(100));  // 70 % slow steps
  CHECK(pace.Steady() == milliseconds(60));
  for (size_t i = 0; i < ft::kPaceWindow; ++i) pace.Record(milliseconds(100));  // slower for good
  CHECK(pace.Steady() == milliseconds(200));
}

TEST_CASE("StepPace: a fast step waits at least the floor, a slow one at most the ceiling") {
  ft::StepPace pace(milliseconds(3000));
  for (size_t i = 0; i < ft::kMinPaceSteps; ++i) pace.Record(milliseconds(1));
  CHECK(pace.Steady() == ft::kMinSteadyStall);
  for (size_t i = 0; i < ft::kPaceWindow; ++i) pace.Record(milliseconds(10000));
  CHECK(pace.Steady() == milliseconds(3000));
  CHECK(pace.Changed() == milliseconds(3000));
}
