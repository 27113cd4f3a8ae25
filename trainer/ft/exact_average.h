// ExactAverage: the cross-replica step of --ft-exact (docs/fault-tolerance.md,
// "Exact results"): a step's gradient that does not depend on the quorum.
//
// A step's global batch is cut into a fixed number of shards by sample
// position (step_share.h: shard s of S, S = ranks per group x MAX groups),
// whoever is alive. Each rank runs its shards' backward passes one by one
// (shard s goes to rank s mod the quorum's ranks) and keeps each shard's
// gradients (AddShard). Reduce then makes every gradient the mean over the
// S shards, added exactly (fixed_point.h): per parameter (a bucket) a power
// of two, each shard's values scaled by it and rounded to int64, summed
// over the quorum's groups (the ring of the rank's local rank) and then the
// group's ranks (Gloo), read back once. The ring comes first so that every
// rank of a group makes the same Gloo calls whatever its own ring did: a
// failure slot in the message, summed with the rest, tells them all. Integer addition is associative, so the result's bits depend
// on the shards' gradients alone: not on how many groups there are, which
// rank ran which shard, or the order of the ring. A shard's gradients are
// the same bits wherever it runs when the ranks run the same build with the
// same thread count (--deterministic).
//
// The power of two is agreed without a round of its own: it comes from the
// hint, each bucket's largest magnitude at the last committed step (with
// kHintHeadroomBits of room). The sum's message also carries each rank's
// own largest magnitudes (in a slot of its own, so the sum gathers them)
// and a count of the ranks whose values did not fit the hint. When that
// count is 0 the sum is the result; otherwise (the first step, a gradient
// grown 256-fold) a second sum at the power of two of the step's own
// largest magnitudes, now known to all, replaces it. Either way the choice
// and the result follow from the shards' gradients and the hint, which are
// the same in every run; Commit() makes the step's largest magnitudes the
// next hint, and the hint is part of the healing state (HealTensors), so a
// healed group agrees with its peers.
//
// Costs against the plain step (DDP's float all-reduce, then the ring's):
// no overlap of the all-reduce with the backward, int64 values (twice the
// bytes of float32), a second sum on the rare step that outgrows the hint,
// and, while groups are missing, more than one backward per rank, each kept
// until the sum (memory: the model's size per shard a rank runs).
//
// Thread model: the worker's training thread.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "base/result.h"
#include "trainer/comm/communicator.h"
#include "trainer/ft/ft_replica.h"
#include "trainer/ft/heal_state.h"

namespace ctrun::trainer::ft {

class ExactAverage {
 public:
  // `params`: the model's parameters, in the same order on every rank;
  // `shards`: S, the shards of every step.
  ExactAverage(std::vector<at::Tensor> params, int64_t shards);

  // Starts a step: forgets the shards kept.
  void Begin();
  // Keeps the parameters' gradients of one shard (a parameter without a
  // gradient counts as zeros).
  void AddShard();
  // Writes into every parameter's .grad the mean over the S shards of the
  // quorum (this rank's kept ones, its group's and the other groups').
  // `participant`: this rank's index among the quorum's ranks (replica rank
  // x group size + rank), below S. True when done; false when the
  // cross-replica ring failed (the gradients are then undefined and the
  // step's ballot is no). Unavailable when a collective of the group fails,
  // InvalidArgument when a gradient is not finite.
  Result<bool> Reduce(Communicator& group, FtReplica& replica, int participant);
  // The step was committed: its largest magnitudes become the hint.
  void Commit();

  // The hint, for the healing state ("exact/hint").
  std::vector<HealTensor> HealTensors() const;
  // How many steps needed the second sum (their values outgrew the hint).
  int64_t second_sums() const { return second_sums_; }

 private:
  const float* Shard(int k) const;
  // Sums every kept shard at `shift` into the message's sums (none in a
  // bucket without a shift: its values are all zeros).
  void Quantize(const std::vector<std::optional<int>>& shift);
  Result<bool> Sum(Communicator& group, FtReplica& replica, std::size_t count);

  std::vector<at::Tensor> params_;
  int64_t shards_ = 1;
  std::vector<int64_t> offsets_;  // each parameter's first element in a shard's flat copy
  int64_t total_ = 0;
  int kept_ = 0;
  std::vector<float> kept_values_;  // kept_ flat copies, total_ floats each
  at::Tensor hint_;                 // float per parameter: the last committed step's largest magnitudes
  std::vector<float> step_max_;     // per parameter: this step's, over the quorum
  std::vector<int64_t> message_;    // the sums, a failure slot, the misfit count, S x parameters gathered maxima
  int64_t second_sums_ = 0;
};

}  // namespace ctrun::trainer::ft
