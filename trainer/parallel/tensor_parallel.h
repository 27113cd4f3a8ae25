// Megatron-style tensor parallelism over one tensor-parallel group (the tp
// dimension of a DeviceMesh): the conjugate communication operators and the
// column- and row-parallel linear layers built on them.
//
// Operators (differentiable; `tp` null or of size 1 makes each the identity):
//  - CopyToTp (Megatron's f): forward identity, backward all-reduce (sum).
//    Applied to a replicated activation before column-parallel layers.
//  - ReduceFromTp (g): forward all-reduce (sum), backward identity. Applied
//    to the partial outputs of row-parallel layers.
//  - Sequence parallel (activations split along the sequence, dim 1, between
//    the tensor-parallel regions; LayerNorm runs on the local part):
//    GatherSequence: forward all-gather along dim 1, backward reduce-scatter
//    (replaces f); ReduceScatterSequence: forward reduce-scatter along dim 1,
//    backward all-gather (replaces g).
// A collective that fails throws c10::Error out of forward/backward; the
// callers' edges (Pipeline, the apps) turn that into a Status.
//
// Parameters are initialised whole and then cut (InitShard), from a seed
// derived from the parameter's global name, so every layout of the same
// model starts from the same full weights as the single-process model.
//
// Thread model: the thread running forward/backward.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/comm/communicator.h"

namespace ctrun::trainer {

at::Tensor CopyToTp(const at::Tensor& x, Communicator* tp);
at::Tensor ReduceFromTp(const at::Tensor& x, Communicator* tp);
// `x` is [batch, sequence / tp, ...] / [batch, sequence, ...] respectively.
at::Tensor GatherSequence(const at::Tensor& x, Communicator* tp);
at::Tensor ReduceScatterSequence(const at::Tensor& x, Communicator* tp);

// How a parameter is laid out over the tensor-parallel group: the full
// tensor's shape, and the dimension cut into `parts` equal slices of which
// this rank holds slice `index` (dim -1: replicated whole on every rank).
struct ShardSpec {
  std::vector<int64_t> full_shape;
  int dim = -1;
  int index = 0;
  int parts = 1;
  // True when each tensor-parallel rank computes only part of this
  // replicated parameter's gradient (sequence parallel LayerNorm and
  // position embedding): the gradients must be summed over tp.
  bool grad_needs_tp_sum = false;
};

// Global parameter name -> its spec; filled by the layers as they are built.
using ShardRegistry = std::map<std::string, ShardSpec>;

enum class InitKind { kNormal, kZeros, kOnes };

// The slice of a parameter initialised whole from `seed` and `name`
// (normal(0, 0.02), zeros or ones), as `spec` cuts it; registers `name` in
// `registry`.
at::Tensor InitShard(const std::string& name, ShardSpec spec, InitKind init, uint64_t seed,
                     ShardRegistry& registry);

// Sums over `tp` the gradients of the parameters of `module` whose spec
// has grad_needs_tp_sum (sequence parallel). Call after backward (and any
// data-parallel sync), before the optimizer. Unavailable when the
// all-reduce fails.
Status SumPartialGrads(torch::nn::Module& module, const ShardRegistry& registry, Communicator* tp);

// Where a layer sits: its global name prefix, the seed, the tp group and the
// registry of the stage being built.
struct LayerContext {
  std::string name;
  uint64_t seed = 0;
  Communicator* tp = nullptr;  // null: one rank
  ShardRegistry* registry = nullptr;
  bool sequence_parallel = false;

  int tp_rank() const { return tp ? tp->rank() : 0; }
  int tp_size() const { return tp ? tp->size() : 1; }
  LayerContext Child(const std::string& child) const;
};

// y = x A^T + b with A [out, in] cut by rows: this rank holds out/tp output
// features. Input: the replicated activation already in the tensor-parallel
// region (after CopyToTp / GatherSequence); output: this rank's features.
class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  ColumnParallelLinearImpl(const LayerContext& ctx, int64_t in, int64_t out, bool bias = true);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight, bias;
};
TORCH_MODULE(ColumnParallelLinear);

// y = g(x A^T) + b with A [out, in] cut by columns: input is this rank's
// in/tp features (a column-parallel layer's output); output is the whole
// activation, replicated (or, with sequence parallel, this rank's part of
// the sequence). The bias is replicated and added once, after the sum.
class RowParallelLinearImpl : public torch::nn::Module {
 public:
  RowParallelLinearImpl(const LayerContext& ctx, int64_t in, int64_t out);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight, bias;

 private:
  Communicator* tp_;
  bool sequence_parallel_;
};
TORCH_MODULE(RowParallelLinear);

// LayerNorm over the last dimension with replicated weight and bias (their
// gradients need a tp sum under sequence parallel: see ShardSpec).
class ReplicatedLayerNormImpl : public torch::nn::Module {
 public:
  ReplicatedLayerNormImpl(const LayerContext& ctx, int64_t width);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight, bias;
};
TORCH_MODULE(ReplicatedLayerNorm);

}  // namespace ctrun::trainer
