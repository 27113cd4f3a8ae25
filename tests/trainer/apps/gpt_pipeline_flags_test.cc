// ctrun-gpt's pipeline flags: --pp-schedule interleaved with
// --pp-virtual-stages, and each misuse refused in one line naming the flag
// and the fix.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/trainer/apps/gpt_refusal.h"
#include "trainer/apps/gpt_flags.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::Refusal;

TEST_CASE("ParseGptFlags: --pp-virtual-stages defaults to 1; interleaved takes V >= 2") {
  auto plain = ct::ParseGptFlags({"--mesh", "pp=2"});
  REQUIRE(plain.ok());
  CHECK(plain->virtual_stages == 1);
  auto interleaved = ct::ParseGptFlags({"--mesh", "pp=4", "--pp-schedule", "interleaved", "--pp-virtual-stages",
                                        "2", "--layers", "8", "--micro-batches", "8"});
  REQUIRE(interleaved.ok());
  CHECK(interleaved->schedule == ct::PipeSchedule::kInterleaved);
  CHECK(interleaved->virtual_stages == 2);
}

TEST_CASE("ParseGptFlags: interleaved misuse is one line naming the flag and the fix") {
  CHECK(Refusal({"--mesh", "pp=2", "--pp-virtual-stages", "2"}) ==
        "--pp-virtual-stages 2 needs --pp-schedule interleaved (1f1b runs one model chunk per stage)");
  CHECK(Refusal({"--mesh", "pp=2", "--pp-schedule", "interleaved"}) ==
        "--pp-schedule interleaved needs --pp-virtual-stages 2 or more (the model chunks each stage holds); "
        "for one chunk a stage use --pp-schedule 1f1b");
  CHECK(Refusal({"--pp-schedule", "interleaved", "--pp-virtual-stages", "2"}) ==
        "--pp-schedule interleaved needs a pipeline: give --mesh pp=2 or more");
  CHECK(Refusal({"--mesh", "pp=4", "--pp-schedule", "interleaved", "--pp-virtual-stages", "2", "--layers", "6",
                 "--micro-batches", "8"}) ==
        "--layers 6 cannot be cut into pp=4 x --pp-virtual-stages 2 = 8 equal chunks; use --layers 8 (a multiple "
        "of 8) or fewer --pp-virtual-stages");
  CHECK(Refusal({"--mesh", "pp=4", "--pp-schedule", "interleaved", "--pp-virtual-stages", "2", "--layers", "8",
                 "--micro-batches", "6"}) ==
        "--micro-batches 6 is not a multiple of the pipeline's 4 stages, which --pp-schedule interleaved with "
        "--pp-virtual-stages 2 needs; use 4 or 8");
  CHECK(Refusal({"--mesh", "pp=2", "--pp-schedule", "interleaved", "--pp-virtual-stages", "2", "--pp-split",
                 "3,1"}) ==
        "--pp-split with --pp-schedule interleaved: not supported (the chunks are cut by layer count); drop "
        "--pp-split");
  CHECK_THAT(Refusal({"--pp-virtual-stages", "0"}), Catch::Contains("--pp-virtual-stages"));
}
