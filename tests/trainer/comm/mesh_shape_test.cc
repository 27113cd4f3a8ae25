// MeshShape: parsing --mesh, the rank <-> coordinate map, sub-group ranks,
// and the one-line errors for shapes that do not fit the world or the model.
#include <catch2/catch.hpp>

#include <set>

#include "trainer/comm/mesh_shape.h"

namespace ct = ctrun::trainer;

TEST_CASE("ParseMeshShape: names in any order, missing ones are 1") {
  auto full = ct::ParseMeshShape("pp=2,dp=2,tp=2");
  REQUIRE(full.ok());
  CHECK(*full == ct::MeshShape{2, 2, 2});
  auto some = ct::ParseMeshShape("tp=4,pp=2");
  REQUIRE(some.ok());
  CHECK(*some == ct::MeshShape{2, 1, 4});
  auto none = ct::ParseMeshShape("");
  REQUIRE(none.ok());
  CHECK(none->size() == 1);
  CHECK(full->ToString() == "pp=2,dp=2,tp=2");
}

TEST_CASE("ParseMeshShape: each bad part is named") {
  auto check = [](const std::string& text, const std::string& message) {
    auto parsed = ct::ParseMeshShape(text);
    REQUIRE(!parsed.ok());
    CHECK(parsed.status().message() == message);
  };
  check("pp=2,xx=2", "--mesh 'pp=2,xx=2': 'xx=2' is not pp=N, dp=N or tp=N (use e.g. --mesh pp=2,dp=2,tp=2)");
  check("tp=2,tp=4", "--mesh 'tp=2,tp=4': tp is given twice (use e.g. --mesh pp=2,dp=2,tp=2)");
  check("dp=0", "--mesh 'dp=0': dp must be a positive integer (use e.g. --mesh pp=2,dp=2,tp=2)");
  check("dp=two", "--mesh 'dp=two': dp must be a positive integer (use e.g. --mesh pp=2,dp=2,tp=2)");
  check("pp2", "--mesh 'pp2': 'pp2' is not pp=N, dp=N or tp=N (use e.g. --mesh pp=2,dp=2,tp=2)");
}

TEST_CASE("MeshShape: tp innermost, then dp, then pp") {
  const ct::MeshShape mesh{2, 2, 2};
  for (int rank = 0; rank < 8; ++rank) CHECK(mesh.RankOf(mesh.CoordOf(rank)) == rank);
  CHECK(mesh.CoordOf(5) == ct::MeshCoord{1, 0, 1});
  CHECK(mesh.GroupRanks(ct::MeshDim::kTp, 5) == std::vector<int>{4, 5});
  CHECK(mesh.GroupRanks(ct::MeshDim::kDp, 5) == std::vector<int>{5, 7});
  CHECK(mesh.GroupRanks(ct::MeshDim::kPp, 5) == std::vector<int>{1, 5});
  // Members of one group agree on its index; different groups differ.
  for (auto dim : {ct::MeshDim::kPp, ct::MeshDim::kDp, ct::MeshDim::kTp}) {
    std::set<int> indices;
    for (int rank = 0; rank < 8; ++rank) {
      for (int peer : mesh.GroupRanks(dim, rank)) CHECK(mesh.GroupIndex(dim, peer) == mesh.GroupIndex(dim, rank));
      indices.insert(mesh.GroupIndex(dim, rank));
    }
    CHECK(static_cast<int>(indices.size()) == 8 / mesh.extent(dim));
  }
}

TEST_CASE("CheckMeshShape: the product must be the world, each dimension must divide the model") {
  ct::MeshModelLimits model{.heads = 4, .hidden = 64, .ffn_hidden = 256, .vocab = 128, .layers = 4,
                            .global_batch = 16, .micro_batches = 4};
  CHECK(ct::CheckMeshShape({2, 2, 2}, 8, model).ok());
  CHECK(ct::CheckMeshShape({2, 2, 2}, 4, model).message() ==
        "--mesh pp=2,dp=2,tp=2: pp*dp*tp = 8 but WORLD_SIZE is 4 (make the product equal the number of workers)");
  CHECK(ct::CheckMeshShape({1, 1, 3}, 3, model).message() ==
        "--mesh pp=1,dp=1,tp=3: tp=3 does not divide the model's attention heads (4); pick a tp that divides it");
  CHECK(ct::CheckMeshShape({8, 1, 1}, 8, model).message() ==
        "--mesh pp=8,dp=1,tp=1: pp=8 stages but the model has 4 layers (use at most one stage per layer)");
  CHECK(ct::CheckMeshShape({1, 8, 1}, 8, model).message() ==
        "--mesh pp=1,dp=8,tp=1: the global batch (16) is not divisible by dp x micro-batches (8 x 4); "
        "change --global-batch or --micro-batches");
}

TEST_CASE("StageLayers: by count (earlier stages take the remainder) or a given split") {
  CHECK(ct::StageLayers(4, 2, 0) == std::array<int, 2>{0, 2});
  CHECK(ct::StageLayers(4, 2, 1) == std::array<int, 2>{2, 4});
  CHECK(ct::StageLayers(5, 3, 0) == std::array<int, 2>{0, 2});
  CHECK(ct::StageLayers(5, 3, 2) == std::array<int, 2>{4, 5});
  auto split = ct::ParseStageSplit("3,1", 2, 4);
  REQUIRE(split.ok());
  CHECK(ct::StageLayers(4, 2, 1, *split) == std::array<int, 2>{3, 4});
  CHECK(ct::ParseStageSplit("2,1", 2, 4).status().message() ==
        "--pp-split '2,1': needs 2 counts (one per pipeline stage) summing to the 4 layers");
  CHECK(ct::ParseStageSplit("4,0", 2, 4).status().message() ==
        "--pp-split '4,0': '0' is not a positive layer count (use e.g. --pp-split 3,1)");
}

TEST_CASE("DpSplit: contiguous dp indices shard, equal positions replicate (HSDP)") {
  // dp=4 split as 2 replicas x 2 shards, with tp=2 and pp=2 around it:
  // rank = (pp * 4 + dp) * 2 + tp.
  const ct::MeshShape mesh{2, 4, 2};
  using D = ct::DpSplitDim;
  // pp 0, tp 1, dp 3 -> rank 7: shard group dp {2,3}, replicate group dp {1,3}.
  CHECK(ct::DpSplitRanks(mesh, 2, D::kShard, 7) == std::vector<int>{5, 7});
  CHECK(ct::DpSplitRanks(mesh, 2, D::kReplicate, 7) == std::vector<int>{3, 7});
  // pp 1, tp 0, dp 0 -> rank 8.
  CHECK(ct::DpSplitRanks(mesh, 2, D::kShard, 8) == std::vector<int>{8, 10});
  CHECK(ct::DpSplitRanks(mesh, 2, D::kReplicate, 8) == std::vector<int>{8, 12});
  // shard = dp: one shard group = the dp group, one-rank replicate groups;
  // shard = 1: the reverse.
  CHECK(ct::DpSplitRanks(mesh, 4, D::kShard, 7) == mesh.GroupRanks(ct::MeshDim::kDp, 7));
  CHECK(ct::DpSplitRanks(mesh, 4, D::kReplicate, 7) == std::vector<int>{7});
  CHECK(ct::DpSplitRanks(mesh, 1, D::kShard, 7) == std::vector<int>{7});
  CHECK(ct::DpSplitRanks(mesh, 1, D::kReplicate, 7) == mesh.GroupRanks(ct::MeshDim::kDp, 7));
  CHECK(std::string(ct::DpSplitDimName(D::kShard)) == "dp_shard");
  CHECK(std::string(ct::DpSplitDimName(D::kReplicate)) == "dp_replicate");
}

TEST_CASE("DpSplit: every rank is in exactly one group of each kind, named alike by its members") {
  const ct::MeshShape mesh{2, 4, 2};
  for (int shard : {1, 2, 4}) {
    for (ct::DpSplitDim dim : {ct::DpSplitDim::kShard, ct::DpSplitDim::kReplicate}) {
      std::set<int> indices;
      for (int rank = 0; rank < mesh.size(); ++rank) {
        const auto ranks = ct::DpSplitRanks(mesh, shard, dim, rank);
        const int index = ct::DpSplitGroupIndex(mesh, shard, dim, rank);
        indices.insert(index);
        int position = -1;
        for (size_t i = 0; i < ranks.size(); ++i) {
          if (i > 0) CHECK(ranks[i] > ranks[i - 1]);  // ascending, as NewGroup needs
          if (ranks[i] == rank) position = static_cast<int>(i);
          CHECK(ct::DpSplitGroupIndex(mesh, shard, dim, ranks[i]) == index);
          CHECK(ct::DpSplitRanks(mesh, shard, dim, ranks[i]) == ranks);
          // the same pp and tp: only dp differs
          CHECK(mesh.CoordOf(ranks[i]).pp == mesh.CoordOf(rank).pp);
          CHECK(mesh.CoordOf(ranks[i]).tp == mesh.CoordOf(rank).tp);
        }
        const int dp = mesh.CoordOf(rank).dp;
        CHECK(position == (dim == ct::DpSplitDim::kShard ? dp % shard : dp / shard));
      }
      const int per_dp_group = dim == ct::DpSplitDim::kShard ? 4 / shard : shard;
      CHECK(static_cast<int>(indices.size()) == 4 * per_dp_group);  // pp*tp dp groups
      CHECK(*indices.begin() == 0);
      CHECK(*indices.rbegin() == 4 * per_dp_group - 1);
    }
  }
}

TEST_CASE("CheckDpShardSize: a divisor of dp, else one line") {
  const ct::MeshShape mesh{1, 4, 2};
  for (int shard : {1, 2, 4}) CHECK(ct::CheckDpShardSize(mesh, shard).ok());
  for (int shard : {0, 3, 8}) {
    auto status = ct::CheckDpShardSize(mesh, shard);
    REQUIRE(!status.ok());
    CHECK(status.message() == "--dp-shard-size " + std::to_string(shard) +
                                  " does not divide dp=4 of --mesh pp=1,dp=4,tp=2; pick a divisor of dp (dp "
                                  "itself shards over all of dp)");
  }
}
