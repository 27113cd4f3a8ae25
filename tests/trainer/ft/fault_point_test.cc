#include "trainer/ft/fault_point.h"

#include <catch2/catch.hpp>

namespace ft = ctrun::trainer::ft;

TEST_CASE("CTRUN_FT_FAULT: rank, step and point; the first attempt only") {
  auto none = ft::ParseFtFault(nullptr, nullptr);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  CHECK_FALSE(ft::ParseFtFault("", "0")->has_value());
  auto train = ft::ParseFtFault("1:5:train", nullptr);
  REQUIRE(train.ok());
  REQUIRE(train->has_value());
  CHECK((*train)->local_rank == 1);
  CHECK((*train)->step == 5);
  CHECK((*train)->point == ft::FaultPoint::kTrain);
  CHECK((*ft::ParseFtFault("0:0:vote", "0"))->point == ft::FaultPoint::kVote);
  CHECK((*ft::ParseFtFault("0:3:serve", "0"))->point == ft::FaultPoint::kServe);
  // The restarted group runs on.
  auto restarted = ft::ParseFtFault("1:5:train", "1");
  REQUIRE(restarted.ok());
  CHECK_FALSE(restarted->has_value());
}

TEST_CASE("CTRUN_FT_FAULT that does not parse is an error naming it") {
  for (const char* bad : {"1:5", "x:5:train", "1:y:train", "1:5:eat", "-1:5:train", "1:-5:train", "1:5:train:x"}) {
    INFO(bad);
    auto r = ft::ParseFtFault(bad, "1");  // refused even where it would not apply
    REQUIRE(r.status().IsInvalidArgument());
    CHECK_THAT(r.status().message(), Catch::StartsWith("CTRUN_FT_FAULT '"));
  }
}

TEST_CASE("CTRUN_FT_HOLD: a step and a path; a hold at another step passes at once") {
  CHECK_FALSE(ft::ParseFtHold(nullptr)->has_value());
  auto hold = ft::ParseFtHold("8:/tmp/x:y");
  REQUIRE(hold.ok());
  CHECK((*hold)->step == 8);
  CHECK((*hold)->path == "/tmp/x:y");
  for (const char* bad : {"8", "8:", "x:/tmp/a", "-1:/tmp/a"}) {
    INFO(bad);
    CHECK_THAT(ft::ParseFtHold(bad).status().message(), Catch::StartsWith("CTRUN_FT_HOLD '"));
  }
  CHECK(ft::MaybeHold(*hold, 7).ok());  // not its step: no wait
  CHECK_FALSE(ft::ParseFtHold("join:/tmp/r", "0")->has_value());  // the first attempt joins at once
  auto join = ft::ParseFtHold("join:/tmp/r", "2");
  REQUIRE(join->has_value());
  CHECK((*join)->step == ft::FtHold::kJoin);
  CHECK((*join)->path == "/tmp/r");
  CHECK(ft::MaybeHold(ft::FtHold{.step = 3, .path = "/"}, 3).ok());  // the path exists
}
