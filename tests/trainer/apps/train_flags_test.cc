#include <catch2/catch.hpp>

#include "trainer/apps/train_flags.h"

namespace ct = ctrun::trainer;

TEST_CASE("ParseTrainFlags: defaults") {
  auto flags = ct::ParseTrainFlags({});
  REQUIRE(flags.ok());
  CHECK(flags->epochs == 2);
  CHECK(flags->batch_size == 64);
  CHECK(flags->data_dir == "/usr/share/datasets/fashion-mnist");
  CHECK(flags->checkpoint_dir.empty());
  CHECK(flags->eval_every == 1);
  CHECK_FALSE(flags->deterministic);
}

TEST_CASE("ParseTrainFlags: both spellings of values") {
  auto flags = ct::ParseTrainFlags({"--epochs", "3", "--lr=0.1", "--deterministic",
                                    "--checkpoint-dir", "/tmp/x", "--grad-compression=fp16"});
  REQUIRE(flags.ok());
  CHECK(flags->epochs == 3);
  CHECK(flags->lr == Approx(0.1));
  CHECK(flags->deterministic);
  CHECK(flags->checkpoint_dir == "/tmp/x");
  CHECK(flags->grad_compression == "fp16");
  CHECK(ct::ParseTrainFlags({"--eval-every", "10"})->eval_every == 10);
}

TEST_CASE("ParseTrainFlags: errors name the flag and the fix") {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  for (const Case& c : {Case{{"--epochs", "0"}, "--epochs 0: must be at least 1"},
                        Case{{"--epochs", "two"}, "--epochs 'two': not an integer"},
                        Case{{"--eval-every", "0"}, "--eval-every 0: must be at least 1"},
                        Case{{"--lr", "-1"}, "--lr -1: must be greater than 0"},
                        Case{{"--lr", "fast"}, "--lr 'fast': not a number"},
                        Case{{"--batch-size"}, "--batch-size: missing value"},
                        Case{{"--bogus", "1"}, "unknown flag '--bogus'"},
                        Case{{"--grad-compression", "int8"}, "use none, fp16 or bf16"},
                        Case{{"--backend", "mpi"}, "use gloo or nccl"}}) {
    auto flags = ct::ParseTrainFlags(c.args);
    INFO(c.needle);
    REQUIRE_FALSE(flags.ok());
    CHECK(flags.status().IsInvalidArgument());
    CHECK(flags.status().message().find(c.needle) != std::string::npos);
  }
}

TEST_CASE("ParseTrainFlags: --ft and --dump-state") {
  auto flags = ct::ParseTrainFlags({"--ft", "--dump-state", "/tmp/state"});
  REQUIRE(flags.ok());
  CHECK(flags->ft);
  CHECK(flags->dump_state == "/tmp/state");
  CHECK_FALSE(ct::ParseTrainFlags({})->ft);
  CHECK(ct::ParseTrainFlags({"--dump-state", "x"}).status().message() ==
        "--dump-state needs --ft (without it use --dump-params)");
  CHECK(ct::ParseTrainFlags({"--ft", "--strategy", "fsdp"}).status().message() ==
        "--ft needs --strategy ddp and no --grad-compression");
  CHECK(ct::ParseTrainFlags({"--ft", "--grad-compression", "fp16"}).status().code() ==
        ctrun::Status::Code::kInvalidArgument);
  CHECK(ct::ParseTrainFlags({"--ft", "--checkpoint-dir", "/tmp/x"}).status().message().rfind(
            "--ft with --checkpoint-dir: not supported yet", 0) == 0);
}
