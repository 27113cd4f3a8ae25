// Top-k gradient sparsification with error feedback: Deep Gradient
// Compression (Lin et al., arXiv 1712.01887), the state and arithmetic of
// one DDP bucket. DistributedDataParallel (ddp.h) owns one TopkBucket per
// bucket under GradCompression::kTopk and does the communication: it
// all-gathers the message Compress returns and hands the result to
// Decompress.
//
// Per step, on each rank, with error feedback (DGC); u and v are kept per
// parameter (each a slot of the bucket's flat state):
//   g  = local gradient, each parameter's clipped to clip_norm / sqrt(world)
//        (L2; "local gradient clipping")
//   u  = momentum * u + g          (momentum correction: the momentum is
//   v  = v + u                      accumulated locally, before sparsifying)
//   send the k = ceil(density * numel) entries of v largest in |v|, chosen
//   over the whole bucket (default) or per parameter (per_parameter);
//   zero them in v and u           (momentum factor masking)
// Bucket-wide selection lets a layer whose entries matter more take more of
// the k (SmallCnn's first convolution has 400 weights: per parameter it
// would send 4 a step); it also costs one top-k per bucket.
// Every rank's (value, index) pairs are summed into a dense gradient and
// divided by the world size; the optimizer applies it as it is: it must run
// WITHOUT momentum of its own (the momentum is in u).
//
// Without error feedback (the comparison DGC argues against): each rank
// sends the top k of its clipped local gradient and drops the rest; the
// averaged sparse gradient then goes through plain momentum
// (u = momentum * u + avg; the step uses u), so the optimizer still runs
// without momentum.
//
// Warm-up: the first warmup_steps synced steps are dense (DDP's plain
// all-reduce of the mean gradient); DenseStep applies plain momentum to the
// mean, u = momentum * u + mean, so warm-up is exactly momentum SGD. The
// sparse phase starts from that u, with v = 0.
//
// Wire format: one int32 tensor of 2K entries per rank, K = the sum of the
// slots' k: K float32 values (their bits) then K indices into the bucket.
// Only float32 buckets are supported.
//
// Thread model: one thread (the one that runs backward). Not copyable.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

struct TopkOptions {
  double density = 0.01;      // share of each parameter's entries sent, (0, 1]
  bool error_feedback = true;
  double momentum = 0.9;      // DGC's momentum; the optimizer's must be 0
  int64_t warmup_steps = 0;   // dense synced steps before sparsifying
  double clip_norm = 0;       // global L2 limit per parameter; 0 = none
  bool per_parameter = false;  // k per parameter instead of per bucket
};

// InvalidArgument naming the flag when density is not in (0, 1], momentum
// not in [0, 1), warmup_steps < 0 or clip_norm < 0.
Status CheckTopkOptions(const TopkOptions& options);

// Entries sent for a parameter of `numel` entries: ceil(density * numel),
// at least 1, at most numel.
int64_t TopkCount(int64_t numel, double density);

// Indices (int64, into `flat`) of the `k` entries of 1-D `flat` largest in
// absolute value (ties: torch's order).
at::Tensor SelectTopk(const at::Tensor& flat, int64_t k);

class TopkBucket {
 public:
  // A bucket whose slot s is flat[offsets[s], offsets[s] + numels[s]);
  // `total` entries of float32 on `options`' device.
  TopkBucket(std::vector<int64_t> offsets, std::vector<int64_t> numels, int64_t total,
             const at::TensorOptions& options, TopkOptions topk);
  TopkBucket(const TopkBucket&) = delete;
  TopkBucket& operator=(const TopkBucket&) = delete;

  // K: the (value, index) pairs each rank sends per sparse step.
  int64_t message_count() const { return message_count_; }

  // The sparse step's first half: folds this rank's local gradient `grad`
  // (flat, float32, not divided by the world size) into the state as the
  // header says and returns the int32 message of 2K entries. `grad` is
  // clipped in place when clip_norm > 0.
  at::Tensor Compress(at::Tensor& grad, int world);
  // The second half: `gathered` holds the world's messages back to back
  // (world * 2K int32); writes their sum / world into `out` (flat,
  // float32), then, without error feedback, applies plain momentum to it.
  void Decompress(const at::Tensor& gathered, int world, at::Tensor& out);
  // A dense (warm-up) step: `mean` is the all-reduced mean gradient;
  // replaced in place by u = momentum * u + mean.
  void DenseStep(at::Tensor& mean);

  // The state, flat like the bucket: u (momentum) and v (the residual that
  // error feedback keeps; all zeros without it).
  const at::Tensor& momentum() const { return u_; }
  const at::Tensor& residual() const { return v_; }

 private:
  at::Tensor SelectAll(const at::Tensor& source) const;

  std::vector<int64_t> offsets_, numels_, counts_;
  int64_t message_count_ = 0;
  TopkOptions options_;
  at::Tensor u_, v_;
};

}  // namespace ctrun::trainer
