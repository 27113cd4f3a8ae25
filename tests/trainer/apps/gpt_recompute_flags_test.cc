// ctrun-gpt's --recompute flag, and --pp-schedule interleaved's refusal.
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
  auto fsdp = ct::ParseGptFlags({"--strategy", "fsdp", "--recompute", "full"});
  REQUIRE(!fsdp.ok());
  CHECK(fsdp.status().message() ==
        "--strategy fsdp with --recompute full: not supported yet; use --strategy ddp, or --recompute none");
}

TEST_CASE("ParseGptFlags: --pp-schedule interleaved is refused until the runner holds several chunks") {
  auto interleaved = ct::ParseGptFlags({"--pp-schedule", "interleaved"});
  REQUIRE(!interleaved.ok());
  CHECK(interleaved.status().message() ==
        "--pp-schedule interleaved: not supported by ctrun-gpt's pipeline runner yet (use 1f1b or gpipe)");
}
