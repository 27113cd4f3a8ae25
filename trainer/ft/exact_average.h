// ExactAverage: the cross-replica step of --ft-exact (docs/fault-tolerance.md,
// "Exact results"): a step's gradient that does not depend on the quorum.
//
// A step's global batch is cut into a fixed number of shards by sample
// position (step_share.h: shard s of S, S = ranks per group x MAX groups),
// whoever is alive. Each rank runs its shards' backward passes one by one
// (shard s goes to rank s mod the quorum's ranks) and keeps each shard's
// gradients (AddShard). Reduce then makes every gradient the mean over the
// S shards, added exactly (fixed_point.h): per parameter (a bucket), the
// largest magnitude over all shards (a float maximum over the group's ranks,
// then over the quorum's groups), from it a power of two, each shard's
// values scaled by it and rounded to int64 and summed (over the group, then
// the quorum), read back once. Maximum and int64 sum are exact, so the
// result's bits depend on the shards' gradients alone: not on how many
// groups there are, which rank ran which shard, or the order of the ring.
// A shard's gradients are the same bits wherever it runs when the ranks run
// the same build with the same thread count (--deterministic).
//
// Costs against the plain step (DDP's float all-reduce, then the ring's):
// no overlap of the all-reduce with the backward, a small maximum
// all-reduce first, int64 values (twice the bytes of float32), and, while
// groups are missing, more than one backward per rank, each kept until the
// scale is agreed (memory: the model's size per shard a rank runs).
//
// Thread model: the worker's training thread.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "trainer/comm/communicator.h"
#include "trainer/ft/ft_replica.h"

namespace ctrun::trainer::ft {

class ExactAverage {
 public:
  // `params`: the model's parameters, in the same order on every rank.
  explicit ExactAverage(std::vector<at::Tensor> params);

  // Starts a step: forgets the shards kept.
  void Begin();
  // Keeps the parameters' gradients of one shard (a parameter without a
  // gradient counts as zeros).
  void AddShard();
  // Writes into every parameter's .grad the mean over `shards` shards of
  // the quorum (this rank's kept ones, its group's and the other groups').
  // True when done; false when the cross-replica ring failed (the
  // gradients are then undefined and the step's ballot is no). Unavailable
  // when a collective of the group fails, InvalidArgument when a gradient
  // is not finite.
  Result<bool> Reduce(Communicator& group, FtReplica& replica, int64_t shards);

 private:
  std::vector<at::Tensor> params_;
  std::vector<int64_t> offsets_;  // each parameter's first element in a shard's flat copy
  int64_t total_ = 0;
  int kept_ = 0;
  std::vector<float> shards_;      // kept_ flat copies, total_ floats each
  std::vector<float> max_;         // per parameter: the largest magnitude
  std::vector<int> shift_;         // per parameter: the agreed power of two
  std::vector<int64_t> sums_;      // total_ fixed-point sums
};

}  // namespace ctrun::trainer::ft
