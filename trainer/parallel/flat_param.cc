#include "trainer/parallel/flat_param.h"

#include <algorithm>

namespace ctrun::trainer {

std::pair<int64_t, int64_t> FlatLayout::RealRange(int rank) const {
  const int64_t begin = std::min(numel, rank * shard_numel);
  const int64_t end = std::min(numel, (rank + 1) * shard_numel);
  return {begin, end};
}

FlatLayout MakeFlatLayout(std::vector<FlatEntry> entries, int world) {
  FlatLayout layout;
  layout.world = std::max(1, world);
  for (auto& entry : entries) {
    int64_t numel = 1;
    for (int64_t d : entry.shape) numel *= d;
    entry.offset = layout.numel;
    entry.numel = numel;
    layout.numel += numel;
  }
  layout.entries = std::move(entries);
  layout.shard_numel = (layout.numel + layout.world - 1) / layout.world;
  layout.padded_numel = layout.shard_numel * layout.world;
  return layout;
}

std::vector<ReshardPiece> ReshardPlan(int64_t numel, int64_t begin, int64_t end, int old_world) {
  std::vector<ReshardPiece> pieces;
  end = std::min(end, numel);
  if (begin >= end || old_world < 1) return pieces;
  const int64_t old_shard = (numel + old_world - 1) / old_world;
  for (int q = static_cast<int>(begin / old_shard); q < old_world; ++q) {
    const int64_t piece_begin = std::max(begin, q * old_shard);
    const int64_t piece_end = std::min(end, (q + 1) * old_shard);
    if (piece_begin >= piece_end) break;
    pieces.push_back({q, piece_begin, piece_end});
  }
  return pieces;
}

}  // namespace ctrun::trainer
