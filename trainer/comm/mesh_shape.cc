#include "trainer/comm/mesh_shape.h"

#include <charconv>
#include <set>

namespace ctrun::trainer {
namespace {

constexpr const char* kMeshForm = "(use e.g. --mesh pp=2,dp=2,tp=2)";

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(sep, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

bool ParsePositive(const std::string& text, int& out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && out > 0;
}

}  // namespace

const char* MeshDimName(MeshDim dim) {
  switch (dim) {
    case MeshDim::kPp: return "pp";
    case MeshDim::kDp: return "dp";
    case MeshDim::kTp: return "tp";
  }
  return "?";
}

int MeshShape::extent(MeshDim dim) const {
  switch (dim) {
    case MeshDim::kPp: return pp;
    case MeshDim::kDp: return dp;
    case MeshDim::kTp: return tp;
  }
  return 1;
}

std::string MeshShape::ToString() const {
  return "pp=" + std::to_string(pp) + ",dp=" + std::to_string(dp) + ",tp=" + std::to_string(tp);
}

MeshCoord MeshShape::CoordOf(int rank) const {
  return MeshCoord{.pp = rank / (dp * tp), .dp = (rank / tp) % dp, .tp = rank % tp};
}

int MeshShape::RankOf(const MeshCoord& c) const { return (c.pp * dp + c.dp) * tp + c.tp; }

std::vector<int> MeshShape::GroupRanks(MeshDim dim, int rank) const {
  const MeshCoord base = CoordOf(rank);
  std::vector<int> ranks;
  for (int i = 0; i < extent(dim); ++i) {
    MeshCoord c = base;
    if (dim == MeshDim::kPp) c.pp = i;
    if (dim == MeshDim::kDp) c.dp = i;
    if (dim == MeshDim::kTp) c.tp = i;
    ranks.push_back(RankOf(c));
  }
  return ranks;
}

int MeshShape::GroupIndex(MeshDim dim, int rank) const {
  const MeshCoord c = CoordOf(rank);
  switch (dim) {
    case MeshDim::kPp: return c.dp * tp + c.tp;
    case MeshDim::kDp: return c.pp * tp + c.tp;
    case MeshDim::kTp: return c.pp * dp + c.dp;
  }
  return 0;
}

const char* DpSplitDimName(DpSplitDim dim) { return dim == DpSplitDim::kShard ? "dp_shard" : "dp_replicate"; }

std::vector<int> DpSplitRanks(const MeshShape& shape, int shard, DpSplitDim dim, int rank) {
  MeshCoord c = shape.CoordOf(rank);
  const int group = c.dp / shard, position = c.dp % shard;
  std::vector<int> ranks;
  const int count = dim == DpSplitDim::kShard ? shard : shape.dp / shard;
  for (int i = 0; i < count; ++i) {
    c.dp = dim == DpSplitDim::kShard ? group * shard + i : i * shard + position;
    ranks.push_back(shape.RankOf(c));
  }
  return ranks;
}

int DpSplitGroupIndex(const MeshShape& shape, int shard, DpSplitDim dim, int rank) {
  const MeshCoord c = shape.CoordOf(rank);
  const int dp_group = shape.GroupIndex(MeshDim::kDp, rank);
  return dim == DpSplitDim::kShard ? dp_group * (shape.dp / shard) + c.dp / shard : dp_group * shard + c.dp % shard;
}

Status CheckDpShardSize(const MeshShape& shape, int shard) {
  if (shard >= 1 && shard <= shape.dp && shape.dp % shard == 0) return Status::Ok();
  return Status::InvalidArgument("--dp-shard-size " + std::to_string(shard) + " does not divide dp=" +
                                 std::to_string(shape.dp) + " of --mesh " + shape.ToString() +
                                 "; pick a divisor of dp (dp itself shards over all of dp)");
}

Result<MeshShape> ParseMeshShape(const std::string& text) {
  MeshShape shape;
  if (text.empty()) return shape;
  std::set<std::string> seen;
  for (const std::string& part : Split(text, ',')) {
    const size_t eq = part.find('=');
    const std::string name = part.substr(0, eq);
    if (eq == std::string::npos || (name != "pp" && name != "dp" && name != "tp")) {
      return Status::InvalidArgument("--mesh '" + text + "': '" + part +
                                     "' is not pp=N, dp=N or tp=N " + kMeshForm);
    }
    if (!seen.insert(name).second) {
      return Status::InvalidArgument("--mesh '" + text + "': " + name + " is given twice " + kMeshForm);
    }
    int value = 0;
    if (!ParsePositive(part.substr(eq + 1), value)) {
      return Status::InvalidArgument("--mesh '" + text + "': " + name + " must be a positive integer " +
                                     kMeshForm);
    }
    (name == "pp" ? shape.pp : name == "dp" ? shape.dp : shape.tp) = value;
  }
  return shape;
}

Status CheckMeshShape(const MeshShape& shape, int world_size, const MeshModelLimits& limits) {
  const std::string mesh = "--mesh " + shape.ToString();
  if (shape.size() != world_size) {
    return Status::InvalidArgument(mesh + ": pp*dp*tp = " + std::to_string(shape.size()) +
                                   " but WORLD_SIZE is " + std::to_string(world_size) +
                                   " (make the product equal the number of workers)");
  }
  auto not_divided = [&](const char* what, int value, const char* dim, int extent) {
    return Status::InvalidArgument(mesh + ": " + dim + "=" + std::to_string(extent) +
                                   " does not divide the model's " + what + " (" + std::to_string(value) +
                                   "); pick a " + dim + " that divides it");
  };
  if (limits.heads % shape.tp != 0) return not_divided("attention heads", limits.heads, "tp", shape.tp);
  if (limits.hidden % shape.tp != 0) return not_divided("hidden size", limits.hidden, "tp", shape.tp);
  if (limits.ffn_hidden % shape.tp != 0) return not_divided("MLP size", limits.ffn_hidden, "tp", shape.tp);
  if (limits.vocab % shape.tp != 0) return not_divided("vocabulary", limits.vocab, "tp", shape.tp);
  if (shape.pp > limits.layers) {
    return Status::InvalidArgument(mesh + ": pp=" + std::to_string(shape.pp) + " stages but the model has " +
                                   std::to_string(limits.layers) +
                                   " layers (use at most one stage per layer)");
  }
  if (limits.global_batch % (shape.dp * limits.micro_batches) != 0) {
    return Status::InvalidArgument(mesh + ": the global batch (" + std::to_string(limits.global_batch) +
                                   ") is not divisible by dp x micro-batches (" + std::to_string(shape.dp) +
                                   " x " + std::to_string(limits.micro_batches) +
                                   "); change --global-batch or --micro-batches");
  }
  return Status::Ok();
}

std::array<int, 2> StageLayers(int layers, int stages, int stage, const std::vector<int>& split) {
  int first = 0;
  if (!split.empty()) {
    for (int s = 0; s < stage; ++s) first += split[static_cast<size_t>(s)];
    return {first, first + split[static_cast<size_t>(stage)]};
  }
  const int base = layers / stages, extra = layers % stages;
  for (int s = 0; s < stage; ++s) first += base + (s < extra ? 1 : 0);
  return {first, first + base + (stage < extra ? 1 : 0)};
}

Result<std::vector<int>> ParseStageSplit(const std::string& text, int stages, int layers) {
  std::vector<int> split;
  int total = 0;
  for (const std::string& part : Split(text, ',')) {
    int value = 0;
    if (!ParsePositive(part, value)) {
      return Status::InvalidArgument("--pp-split '" + text + "': '" + part +
                                     "' is not a positive layer count (use e.g. --pp-split 3,1)");
    }
    split.push_back(value);
    total += value;
  }
  if (static_cast<int>(split.size()) != stages || total != layers) {
    return Status::InvalidArgument("--pp-split '" + text + "': needs " + std::to_string(stages) +
                                   " counts (one per pipeline stage) summing to the " +
                                   std::to_string(layers) + " layers");
  }
  return split;
}

}  // namespace ctrun::trainer
