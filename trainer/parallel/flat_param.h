// FlatLayout: where each original parameter of an FSDP unit lives inside the
// unit's flat parameter, and which part of it each rank holds.
//
// The flat parameter is the parameters' elements concatenated in order,
// zero-padded to a multiple of the world size N; rank r holds the shard
// [r * shard_numel, (r+1) * shard_numel). Plain data, no torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ctrun::trainer {

struct FlatEntry {
  std::string name;             // the parameter's name in the root module
  std::vector<int64_t> shape;
  int64_t offset = 0;           // first element in the flat parameter
  int64_t numel = 0;
};

struct FlatLayout {
  std::vector<FlatEntry> entries;
  int64_t numel = 0;            // sum of the entries' numel
  int64_t padded_numel = 0;     // numel rounded up to a multiple of world
  int64_t shard_numel = 0;      // padded_numel / world
  int world = 1;

  // Elements [begin, end) of the flat parameter held by `rank` that are not
  // padding (begin == end when the rank holds only padding).
  std::pair<int64_t, int64_t> RealRange(int rank) const;
};

// Lays out `entries` (name and shape set; offsets and numels filled in) for
// `world` ranks (>= 1).
FlatLayout MakeFlatLayout(std::vector<FlatEntry> entries, int world);

// One copy step when re-sharding from `old_world` to another world size:
// elements [begin, end) of the flat parameter come from old rank `from_rank`.
struct ReshardPiece {
  int from_rank = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// The pieces that make up elements [begin, end) of a flat parameter of
// `numel` real elements, read from its shards over `old_world` ranks, in
// order.
std::vector<ReshardPiece> ReshardPlan(int64_t numel, int64_t begin, int64_t end, int old_world);

}  // namespace ctrun::trainer
