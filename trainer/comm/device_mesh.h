// DeviceMesh: the world's ranks arranged as a (pp, dp, tp) mesh
// (mesh_shape.h), with one Communicator per dimension for this rank's
// sub-group along it, created once, as PyTorch's DeviceMesh does.
//
// A dimension of extent 1 has no group (group() returns null): the parallel
// layers treat a null group as "one rank, nothing to communicate".
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

 private:
  DeviceMesh(std::shared_ptr<Communicator> world, MeshShape shape, int rank);

  std::shared_ptr<Communicator> world_;
  MeshShape shape_;
  int rank_ = 0;
  MeshCoord coord_;
  std::array<std::shared_ptr<Communicator>, 3> groups_;
};

}  // namespace ctrun::trainer
