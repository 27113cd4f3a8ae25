// MeshShape: the (pp, dp, tp) device mesh over WORLD_SIZE ranks, as plain
// integers: parsing "--mesh pp=2,dp=2,tp=2", checking it against the world
// and the model, and mapping ranks to coordinates and to the ranks of each
// dimension's sub-group.
//
// Rank order (PyTorch's DeviceMesh with mesh_dim_names ("pp", "dp", "tp")):
//   rank = (pp_index * dp + dp_index) * tp + tp_index
// so tensor-parallel peers are consecutive ranks (inside one node when
// tp <= LOCAL_WORLD_SIZE), data-parallel replicas stride tp, and pipeline
// stages stride dp * tp.
//
// Plain data, copyable, no torch, no I/O.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

enum class MeshDim { kPp = 0, kDp = 1, kTp = 2 };

// "pp", "dp" or "tp".
const char* MeshDimName(MeshDim dim);

struct MeshCoord {
  int pp = 0;
  int dp = 0;
  int tp = 0;
  bool operator==(const MeshCoord&) const = default;
};

struct MeshShape {
  int pp = 1;
  int dp = 1;
  int tp = 1;

  int size() const { return pp * dp * tp; }
  int extent(MeshDim dim) const;
  // "pp=2,dp=2,tp=2".
  std::string ToString() const;
  bool operator==(const MeshShape&) const = default;

  // Requires 0 <= rank < size().
  MeshCoord CoordOf(int rank) const;
  int RankOf(const MeshCoord& coord) const;
  // The ranks of `rank`'s sub-group along `dim`, in index order (rank's own
  // index along `dim` is its position in the list).
  std::vector<int> GroupRanks(MeshDim dim, int rank) const;
  // Which sub-group along `dim` `rank` is in: 0 .. size()/extent(dim)-1, the
  // same for every member of that group (names the group's store prefix).
  int GroupIndex(MeshDim dim, int rank) const;
};

// HSDP (PyTorch's hybrid sharding; FSDP2's 2-D (replicate, shard) mesh):
// the dp dimension split as dp_replicate x dp_shard. `shard` contiguous dp
// indices form a shard group (parameters sharded within it); the ranks at
// the same position of every shard group form a replicate group (the
// shard's gradient averaged across it). dp index d is in shard group
// d / shard at position d % shard, and in replicate group d % shard at
// position d / shard. Requires 1 <= shard, shard dividing dp.
enum class DpSplitDim { kShard, kReplicate };

// "dp_shard" or "dp_replicate".
const char* DpSplitDimName(DpSplitDim dim);

// The ranks of `rank`'s group along `dim` of the split, in position order
// (rank's own position is its index in the list).
std::vector<int> DpSplitRanks(const MeshShape& shape, int shard, DpSplitDim dim, int rank);
// Which group along `dim` `rank` is in, unique over the whole mesh and the
// same for every member (names the group's store prefix).
int DpSplitGroupIndex(const MeshShape& shape, int shard, DpSplitDim dim, int rank);
// InvalidArgument (one line naming --dp-shard-size and the fix) unless
// 1 <= shard <= shape.dp and shard divides shape.dp.
Status CheckDpShardSize(const MeshShape& shape, int shard);

// Parses "pp=2,dp=2,tp=2": comma-separated name=value pairs, each of pp, dp,
// tp at most once, in any order; a missing one is 1. The empty string is
// the 1x1x1 mesh. InvalidArgument "--mesh '<text>': ..." naming the part
// that is wrong (unknown name, repeated name, not a positive integer) and
// the expected form.
Result<MeshShape> ParseMeshShape(const std::string& text);

// What the model lets each dimension divide.
struct MeshModelLimits {
  int heads = 1;        // attention heads: tp must divide them
  int hidden = 1;       // model width: tp must divide it
  int ffn_hidden = 1;   // MLP width: tp must divide it
  int vocab = 1;        // vocabulary: tp must divide it
  int layers = 1;       // transformer blocks: pp must not exceed them
  int global_batch = 1; // sequences per step: dp * micro_batches must divide it
  int micro_batches = 1;
};

// InvalidArgument (one line, naming the flag, the numbers and the fix) when
// shape.size() != world_size, or a dimension does not divide the model (see
// MeshModelLimits). OK otherwise.
Status CheckMeshShape(const MeshShape& shape, int world_size, const MeshModelLimits& limits);

// Layers [first, last) of pipeline stage `stage` of `stages` when `layers`
// are cut by count: the first layers % stages stages get one more.
// `split`, when not empty, gives each stage's layer count instead (checked
// by CheckStageSplit).
std::array<int, 2> StageLayers(int layers, int stages, int stage, const std::vector<int>& split = {});

// Parses "--pp-split 3,1": one positive count per stage summing to `layers`.
// InvalidArgument naming the flag and the fix otherwise.
Result<std::vector<int>> ParseStageSplit(const std::string& text, int stages, int layers);

}  // namespace ctrun::trainer
