// DistributedSampler: which dataset indices each rank reads in an epoch,
// with the semantics of torch.utils.data.distributed.DistributedSampler.
//
// Epoch order: torch.randperm(n) from a CPU generator seeded with
// seed + epoch (or 0..n-1 without shuffle). Without drop_last the list is
// padded with its own head to a multiple of num_replicas; with drop_last its
// tail is cut to one. Rank r reads positions r, r + R, r + 2R, ... . For the
// same (n, R, r, seed, epoch, shuffle, drop_last) the lists equal PyTorch's.
//
// Resuming mid-epoch: after k steps of a per-rank batch b on R ranks, the
// first k*b*R positions of the epoch's list are consumed (a prefix, because
// ranks stride). IndicesFrom(epoch, consumed) re-shards the unconsumed
// rest of the permutation over *this* sampler's replicas, so an elastic
// restart at another world size sees each remaining sample once and skips
// none (padding as above). Copyable plain data.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

struct SamplerOptions {
  int64_t dataset_size = 0;
  int num_replicas = 1;
  int rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  // Returns the sampler, or InvalidArgument when dataset_size < 1,
  // num_replicas < 1, rank outside [0, num_replicas), or drop_last leaves no
  // sample per rank.
  static Result<DistributedSampler> Create(const SamplerOptions& options);

  // Samples per rank in a whole epoch (PyTorch's num_samples).
  int64_t num_samples() const { return num_samples_; }
  // num_samples() * num_replicas.
  int64_t total_size() const { return num_samples_ * options_.num_replicas; }

  // This rank's indices for `epoch`; equals list(iter(sampler)) in PyTorch
  // after sampler.set_epoch(epoch).
  std::vector<int64_t> Indices(int64_t epoch) const { return IndicesFrom(epoch, 0); }

  // This rank's indices for the rest of `epoch`, after the first `consumed`
  // positions of the epoch's (unpadded) permutation were trained on. Empty
  // when consumed >= dataset_size. consumed == 0 gives Indices(epoch).
  std::vector<int64_t> IndicesFrom(int64_t epoch, int64_t consumed) const;

  // The epoch's full permutation (before padding and striding).
  std::vector<int64_t> EpochOrder(int64_t epoch) const;

  const SamplerOptions& options() const { return options_; }

 private:
  explicit DistributedSampler(const SamplerOptions& options);
  SamplerOptions options_;
  int64_t num_samples_ = 0;
};

// Pads (by repeating from the front, as PyTorch does) or cuts `order` to a
// multiple of `num_replicas` and returns positions rank, rank+R, ... .
// Empty `order` gives an empty list.
std::vector<int64_t> ShardOrder(const std::vector<int64_t>& order, int num_replicas, int rank,
                                bool drop_last);

}  // namespace ctrun::trainer
