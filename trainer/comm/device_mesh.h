// DeviceMesh: the world's ranks arranged as a (pp, dp, tp) mesh
// (mesh_shape.h), with one Communicator per dimension for this rank's
// sub-group along it, created once, as PyTorch's DeviceMesh does.
//
// A dimension of extent 1 has no group (group() returns null): the parallel
// layers treat a null group as "one rank, nothing to communicate".
// SplitDp adds HSDP's dp_shard and dp_replicate sub-groups of dp.
//
// Lifetimes: the world Communicator is shared; the sub-groups share its
// store and are destroyed with the mesh. Not copyable. Thread model: one
// thread, like Communicator.
#pragma once

#include <array>
#include <memory>

#include "base/result.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/mesh_shape.h"

namespace ctrun::trainer {

class DeviceMesh {
 public:
  // Checks shape.size() == world->size() and creates this rank's pp, dp and
  // tp groups (collective over the world: every rank calls it with the same
  // shape). Returns the mesh, InvalidArgument for a shape that does not
  // cover the world, Unavailable when a sub-group cannot be formed.
  static Result<std::unique_ptr<DeviceMesh>> Create(std::shared_ptr<Communicator> world, MeshShape shape);
  // A one-rank mesh with no communication (the single-process reference).
  static std::unique_ptr<DeviceMesh> Single();

  DeviceMesh(const DeviceMesh&) = delete;
  DeviceMesh& operator=(const DeviceMesh&) = delete;

  const MeshShape& shape() const { return shape_; }
  const MeshCoord& coord() const { return coord_; }
  int rank() const { return rank_; }
  // This rank's group along `dim`; null when the dimension's extent is 1.
  Communicator* group(MeshDim dim) const { return groups_[static_cast<size_t>(dim)].get(); }
  // The whole world; null for Single().
  Communicator* world() const { return world_.get(); }
  // The world rank of the pipeline stage `stage` in this rank's pp group.
  int StageRank(int stage) const;

  // HSDP: splits dp into dp_replicate x dp_shard (mesh_shape.h, DpSplitRanks)
  // and makes this rank's two groups. Collective over the world: every rank
  // calls it once, after Create, with the same `shard`. InvalidArgument for
  // a `shard` that does not divide dp (CheckDpShardSize), FailedPrecondition
  // on Single() or a second call, Unavailable when a group cannot be formed.
  Status SplitDp(int shard);
  // After SplitDp: this rank's shard group (never null: a one-rank group
  // when shard is 1; the dp group itself when shard is dp), and its
  // replicate group (null when shard is dp: one replica). Null before.
  Communicator* dp_shard() const { return dp_shard_.get(); }
  Communicator* dp_replicate() const { return dp_replicate_.get(); }

 private:
  DeviceMesh(std::shared_ptr<Communicator> world, MeshShape shape, int rank);

  std::shared_ptr<Communicator> world_;
  MeshShape shape_;
  int rank_ = 0;
  MeshCoord coord_;
  std::array<std::shared_ptr<Communicator>, 3> groups_;
  std::shared_ptr<Communicator> dp_shard_, dp_replicate_;  // SplitDp's
};

}  // namespace ctrun::trainer
