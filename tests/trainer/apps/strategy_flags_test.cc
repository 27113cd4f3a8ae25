// The --strategy / --mixed-precision / --min-unit-params flags of the example worker.
#include <catch2/catch.hpp>

#include "trainer/apps/train_flags.h"

namespace ct = ctrun::trainer;

TEST_CASE("ParseTrainFlags: strategy defaults to ddp and takes the four names") {
  auto flags = ct::ParseTrainFlags({});
  REQUIRE(flags.ok());
  CHECK(flags->strategy == "ddp");
  CHECK(!flags->mixed_precision);
  for (const char* name : {"ddp", "zero1", "zero2", "fsdp"}) {
    auto parsed = ct::ParseTrainFlags({"--strategy", name});
    REQUIRE(parsed.ok());
    CHECK(parsed->strategy == name);
  }
  auto mixed = ct::ParseTrainFlags({"--strategy=fsdp", "--mixed-precision", "--min-unit-params", "5"});
  REQUIRE(mixed.ok());
  CHECK(mixed->mixed_precision);
  CHECK(mixed->min_unit_params == 5);
}

TEST_CASE("ParseTrainFlags: bad strategy settings are one-line errors") {
  auto bad = ct::ParseTrainFlags({"--strategy", "zero3"});
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "--strategy 'zero3': unknown (use ddp, zero1, zero2 or fsdp)");
  auto mixed = ct::ParseTrainFlags({"--mixed-precision"});
  REQUIRE(!mixed.ok());
  CHECK(mixed.status().message().rfind("--mixed-precision needs --strategy zero2 or fsdp", 0) == 0);
}
