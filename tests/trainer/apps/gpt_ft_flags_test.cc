// ctrun-gpt's --ft and --dump-state (gpt_ft_flags.h): what parses, and each
// refusal as one line naming the flag and the fix.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/trainer/apps/gpt_refusal.h"
#include "trainer/apps/gpt_flags.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::Refusal;

TEST_CASE("ParseGptFlags, ft: off by default; --ft with --dump-state on a pure dp mesh") {
  auto plain = ct::ParseGptFlags({});
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->ft);
  CHECK(plain->dump_state.empty());
  auto flags = ct::ParseGptFlags({"--ft", "--micro-batches", "1", "--dump-state", "/tmp/state", "--mesh", "dp=2",
                                  "--optimizer", "sgd", "--recompute", "full"});
  REQUIRE(flags.ok());
  CHECK(flags->ft);
  CHECK(flags->dump_state == "/tmp/state");
  CHECK(Refusal({"--ft", "--micro-batches", "1"}).empty());
}

TEST_CASE("ParseGptFlags, ft: refuses what --ft does not support, in one line") {
  const std::vector<std::string> ft = {"--ft", "--micro-batches", "1"};
  auto with = [&ft](std::vector<std::string> more) {
    more.insert(more.begin(), ft.begin(), ft.end());
    return Refusal(more);
  };
  CHECK(Refusal({"--dump-state", "/tmp/x"}) == "--dump-state needs --ft (without it use --dump-params)");
  CHECK(with({"--mesh", "pp=2"}).rfind("--ft with --mesh pp=2: --ft runs data parallelism only", 0) == 0);
  CHECK(with({"--mesh", "dp=2,tp=2"}).rfind("--ft with --mesh dp=2,tp=2:", 0) == 0);
  CHECK(with({"--strategy", "fsdp"}).empty());  // HSDP: the replica groups are its replicate dimension
  CHECK(with({"--dp-shard", "full"}).rfind("--ft needs --strategy ddp or fsdp and no --dp-shard", 0) == 0);
  CHECK(with({"--checkpoint-dir", "/tmp/x"}).rfind("--ft with --checkpoint-dir: not supported yet", 0) == 0);
  CHECK(with({"--dump-params", "/tmp/x"}) == "--ft writes --dump-state, not --dump-params");
  CHECK(with({"--crash-stage", "0"}) == "--ft with --crash-stage: inject faults with CTRUN_FT_FAULT instead");
  CHECK(Refusal({"--ft"}) == "--ft trains each rank's share of a step in one pass: pass --micro-batches 1");
  // fp16 is refused on Gloo before --ft looks at it; on NCCL --ft refuses it.
  CHECK(with({"--backend", "nccl", "--precision", "fp16"}).rfind("--ft needs --precision fp32", 0) == 0);
}
