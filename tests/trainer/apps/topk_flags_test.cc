// ctrun-fashion-mnist's top-k flags: --grad-compression topk:D and its
// companions, and the one-line refusals.
#include <catch2/catch.hpp>

#include "trainer/apps/train_flags.h"

namespace ct = ctrun::trainer;

TEST_CASE("ParseTrainFlags: topk:D with its options") {
  auto flags = ct::ParseTrainFlags({"--grad-compression", "topk:0.01", "--topk-error-feedback", "off",
                                    "--topk-warmup-steps", "7", "--topk-clip=2.5"});
  REQUIRE(flags.ok());
  CHECK(flags->topk_density == Approx(0.01));
  CHECK_FALSE(flags->topk_error_feedback);
  CHECK(flags->topk_warmup_steps == 7);
  CHECK(flags->topk_clip == Approx(2.5));

  auto defaults = ct::ParseTrainFlags({"--grad-compression=topk:1"});
  REQUIRE(defaults.ok());
  CHECK(defaults->topk_density == 1.0);
  CHECK(defaults->topk_error_feedback);
  CHECK(defaults->topk_warmup_steps == 50);

  auto plain = ct::ParseTrainFlags({"--grad-compression", "fp16"});
  REQUIRE(plain.ok());
  CHECK(plain->topk_density == 0);
}

TEST_CASE("ParseTrainFlags: bad top-k values are refused with the flag and the fix") {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  const char* fix = "top-k needs a density D in (0, 1], e.g. topk:0.01";
  for (const Case& c : {Case{{"--grad-compression", "topk:0"}, fix},
                        Case{{"--grad-compression", "topk:1.5"}, fix},
                        Case{{"--grad-compression", "topk:-0.1"}, fix},
                        Case{{"--grad-compression", "topk:1%"}, fix},
                        Case{{"--grad-compression", "topk"}, fix},
                        Case{{"--grad-compression", "topk:"}, fix},
                        Case{{"--grad-compression", "topk:nan"}, fix},
                        Case{{"--grad-compression", "int8"}, "or topk:D with D in (0, 1]"},
                        Case{{"--grad-compression", "topk:0.01", "--strategy", "fsdp"}, "needs --strategy ddp"},
                        Case{{"--topk-error-feedback", "maybe"}, "--topk-error-feedback 'maybe': use on or off"},
                        Case{{"--topk-warmup-steps", "-1"}, "--topk-warmup-steps -1"},
                        Case{{"--topk-clip", "-1"}, "--topk-clip -1"},
                        Case{{"--topk-error-feedback", "off"}, "--topk-error-feedback applies only to top-k"},
                        Case{{"--grad-compression", "fp16", "--topk-warmup-steps", "0"},
                             "--topk-warmup-steps applies only to top-k: add --grad-compression topk:D"},
                        Case{{"--topk-clip", "1"}, "--topk-clip applies only to top-k"}}) {
    auto flags = ct::ParseTrainFlags(c.args);
    INFO(c.needle);
    REQUIRE_FALSE(flags.ok());
    CHECK(flags.status().IsInvalidArgument());
    CHECK(flags.status().message().find(c.needle) != std::string::npos);
    CHECK(flags.status().message().find("--") != std::string::npos);
  }
}
