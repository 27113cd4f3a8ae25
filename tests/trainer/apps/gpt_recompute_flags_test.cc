// ctrun-gpt's --recompute flag, and --pp-schedule interleaved's refusal without chunks.
#include <catch2/catch.hpp>

#include "trainer/apps/gpt_flags.h"

namespace ct = ctrun::trainer;

TEST_CASE("ParseGptFlags: --recompute defaults to none and takes none, full, selective") {
  auto flags = ct::ParseGptFlags({});
  REQUIRE(flags.ok());
  CHECK(flags->recompute == ct::RecomputePolicy::kNone);
  auto full = ct::ParseGptFlags({"--recompute", "full"});
  REQUIRE(full.ok());
  CHECK(full->recompute == ct::RecomputePolicy::kFull);
  auto selective = ct::ParseGptFlags({"--recompute=selective"});
  REQUIRE(selective.ok());
  CHECK(selective->recompute == ct::RecomputePolicy::kSelective);
}

TEST_CASE("ParseGptFlags: a bad --recompute is a one-line error") {
  auto bad = ct::ParseGptFlags({"--recompute", "half"});
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "--recompute 'half': unknown (use none, full or selective)");
}

TEST_CASE("ParseGptFlags: --recompute composes with --strategy fsdp and --dp-shard") {
  auto fsdp = ct::ParseGptFlags({"--strategy", "fsdp", "--recompute", "full"});
  REQUIRE(fsdp.ok());
  CHECK(fsdp->recompute == ct::RecomputePolicy::kFull);
  auto hsdp = ct::ParseGptFlags({"--mesh", "dp=2,tp=2", "--dp-shard", "grad-op", "--recompute", "selective"});
  REQUIRE(hsdp.ok());
  CHECK(hsdp->recompute == ct::RecomputePolicy::kSelective);
}

TEST_CASE("ParseGptFlags: --pp-schedule interleaved without chunks is refused (gpt_pipeline_flags_test.cc)") {
  auto interleaved = ct::ParseGptFlags({"--pp-schedule", "interleaved"});
  REQUIRE(!interleaved.ok());
  CHECK_THAT(interleaved.status().message(), Catch::StartsWith("--pp-schedule interleaved needs"));
}
