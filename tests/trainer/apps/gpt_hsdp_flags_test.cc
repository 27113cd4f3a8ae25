// ctrun-gpt's --dp-shard and --dp-shard-size (HSDP): what parses, and each
// refusal as one line naming the flag and the fix.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/trainer/apps/gpt_refusal.h"
#include "trainer/apps/gpt_flags.h"
#include "trainer/apps/gpt_hsdp_flags.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::Refusal;

TEST_CASE("ParseGptFlags, dp-shard: none by default, full and grad-op on a dp x tp mesh") {
  auto plain = ct::ParseGptFlags({});
  REQUIRE(plain.ok());
  CHECK(plain->dp_shard == "none");
  CHECK(!ct::DpSharded(*plain));
  for (const char* mode : {"full", "grad-op"}) {
    auto flags = ct::ParseGptFlags({"--mesh", "dp=4,tp=2", "--dp-shard", mode, "--dp-shard-size", "2"});
    REQUIRE(flags.ok());
    CHECK(ct::DpSharded(*flags));
    CHECK(flags->dp_shard_size == 2);
    CHECK(ct::CheckDpShardMesh(*flags, flags->mesh_shape).ok());
  }
  // With pipeline stages, interleaved chunks and recomputation.
  auto piped = ct::ParseGptFlags({"--mesh", "pp=2,dp=4", "--dp-shard", "full", "--dp-shard-size", "2",
                                  "--pp-schedule", "interleaved", "--pp-virtual-stages", "2", "--recompute",
                                  "selective", "--checkpoint-dir", "/tmp/x"});
  REQUIRE(piped.ok());
  CHECK(ct::DpSharded(*piped));
  // dp from WORLD_SIZE: the size is checked once dp is known.
  auto implicit = ct::ParseGptFlags({"--dp-shard", "full", "--dp-shard-size", "3"});
  REQUIRE(implicit.ok());
  CHECK(ct::CheckDpShardMesh(*implicit, ct::MeshShape{1, 6, 1}).ok());
  CHECK(ct::CheckDpShardMesh(*implicit, ct::MeshShape{1, 4, 1}).message() ==
        "--dp-shard-size 3 does not divide dp=4 of --mesh pp=1,dp=4,tp=1; pick a divisor of dp (dp itself shards "
        "over all of dp)");
}

TEST_CASE("ParseGptFlags, dp-shard: each refusal is one line") {
  CHECK(Refusal({"--dp-shard", "zero3"}) == "--dp-shard 'zero3': unknown (use none, full or grad-op)");
  CHECK(Refusal({"--dp-shard-size", "2"}) ==
        "--dp-shard-size 2 without --dp-shard: add --dp-shard full or --dp-shard grad-op");
  CHECK(Refusal({"--mesh", "dp=4", "--dp-shard", "full", "--dp-shard-size", "8"}) ==
        "--dp-shard-size 8 does not divide dp=4 of --mesh pp=1,dp=4,tp=1; pick a divisor of dp (dp itself shards "
        "over all of dp)");
  CHECK(Refusal({"--strategy", "fsdp", "--dp-shard", "full"}) ==
        "--dp-shard with --strategy fsdp: pick one (--dp-shard full shards the mesh's dp; --strategy fsdp is full "
        "sharding over all ranks)");
  const std::string tail = ": not supported yet; drop it or use --dp-shard none";
  CHECK(Refusal({"--mesh", "tp=2", "--dp-shard", "full", "--sequence-parallel"}) ==
        "--dp-shard full with --sequence-parallel" + tail);
  CHECK(Refusal({"--mesh", "dp=2", "--dp-shard", "full", "--cpu-offload", "params"}) ==
        "--dp-shard full with --cpu-offload params" + tail);
}
