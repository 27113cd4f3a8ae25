#include "base/result.h"
#include "base/status.h"

#include <catch2/catch.hpp>

namespace ctrun {
namespace {

TEST_CASE("An OK status has no message") {
  Status s;
  CHECK(s.ok());
  CHECK(s.message().empty());
  CHECK(s.ToString() == "OK");
}

TEST_CASE("A failed status keeps its code and message") {
  Status s = Status::InvalidArgument("--nnodes 0: must be at least 1");
  CHECK_FALSE(s.ok());
  CHECK(s.IsInvalidArgument());
  CHECK(s.message() == "--nnodes 0: must be at least 1");
  CHECK(s.ToString() == "invalid argument: --nnodes 0: must be at least 1");
}

Status FailsWhen(bool fail) {
  CTRUN_RETURN_IF_ERROR(fail ? Status::NotFound("x") : Status::Ok());
  return Status::Aborted("reached the end");
}

TEST_CASE("CTRUN_RETURN_IF_ERROR returns the first failure") {
  CHECK(FailsWhen(true).IsNotFound());
  CHECK(FailsWhen(false).IsAborted());
}

TEST_CASE("Result holds a value or a status") {
  Result<int> good = 7;
  REQUIRE(good.ok());
  CHECK(*good == 7);
  Result<int> bad = Status::Unavailable("peer down");
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().IsUnavailable());
}

}  // namespace
}  // namespace ctrun
