#include "trainer/comm/device_mesh.h"

namespace ctrun::trainer {

DeviceMesh::DeviceMesh(std::shared_ptr<Communicator> world, MeshShape shape, int rank)
    : world_(std::move(world)), shape_(shape), rank_(rank), coord_(shape.CoordOf(rank)) {}

Result<std::unique_ptr<DeviceMesh>> DeviceMesh::Create(std::shared_ptr<Communicator> world, MeshShape shape) {
  if (shape.size() != world->size()) {
    return Status::InvalidArgument("--mesh " + shape.ToString() + ": pp*dp*tp = " + std::to_string(shape.size()) +
                                   " but WORLD_SIZE is " + std::to_string(world->size()) +
                                   " (make the product equal the number of workers)");
  }
  const int rank = world->rank();
  std::unique_ptr<DeviceMesh> mesh(new DeviceMesh(world, shape, rank));
  // Every rank makes its groups in the same dimension order, so no rank
  // waits in one dimension for a peer still forming another.
  for (MeshDim dim : {MeshDim::kPp, MeshDim::kDp, MeshDim::kTp}) {
    if (shape.extent(dim) == 1) continue;
    const std::string name = std::string(MeshDimName(dim)) + "/" + std::to_string(shape.GroupIndex(dim, rank));
    auto group = world->NewGroup(name, shape.GroupRanks(dim, rank));
    if (!group.ok()) return group.status();
    mesh->groups_[static_cast<size_t>(dim)] = *group;
  }
  return mesh;
}

std::unique_ptr<DeviceMesh> DeviceMesh::Single() {
  return std::unique_ptr<DeviceMesh>(new DeviceMesh(nullptr, MeshShape{}, 0));
}

int DeviceMesh::StageRank(int stage) const {
  MeshCoord c = coord_;
  c.pp = stage;
  return shape_.RankOf(c);
}

Status DeviceMesh::SplitDp(int shard) {
  if (world_ == nullptr || dp_shard_ != nullptr) {
    return Status::FailedPrecondition("DeviceMesh::SplitDp: needs a mesh made by Create, split once");
  }
  CTRUN_RETURN_IF_ERROR(CheckDpShardSize(shape_, shard));
  // Shard groups first, then replicate groups, on every rank (as Create).
  for (DpSplitDim dim : {DpSplitDim::kShard, DpSplitDim::kReplicate}) {
    std::shared_ptr<Communicator>& out = dim == DpSplitDim::kShard ? dp_shard_ : dp_replicate_;
    const std::vector<int> ranks = DpSplitRanks(shape_, shard, dim, rank_);
    if (ranks.size() == static_cast<size_t>(shape_.dp) && groups_[static_cast<size_t>(MeshDim::kDp)]) {
      out = groups_[static_cast<size_t>(MeshDim::kDp)];  // the same ranks: reuse dp's group
      continue;
    }
    if (ranks.size() == 1 && dim == DpSplitDim::kReplicate) continue;
    const std::string name =
        std::string(DpSplitDimName(dim)) + "/" + std::to_string(DpSplitGroupIndex(shape_, shard, dim, rank_));
    auto group = world_->NewGroup(name, ranks);
    if (!group.ok()) return group.status();
    out = *group;
  }
  return Status::Ok();
}

}  // namespace ctrun::trainer
