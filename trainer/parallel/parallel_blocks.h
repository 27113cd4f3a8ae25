// The tensor-parallel pieces of a transformer block (Megatron-LM, Shoeybi
// et al. 2019, fig. 3), over the tp group in LayerContext:
//  - ParallelMlp: column-parallel fc1 (width -> ffn, cut by output),
//    GELU, row-parallel fc2 (ffn -> width, cut by input): one all-reduce
//    forward, one backward.
//  - ParallelSelfAttention: causal multi-head self-attention with the heads
//    split over tp (q, k, v column-parallel, each rank heads/tp whole heads;
//    the output projection row-parallel): one all-reduce forward, one
//    backward.
//  - TransformerBlock: pre-LayerNorm block, x + attn(ln1(x)), then
//    x + mlp(ln2(x)).
// With sequence parallel, activations outside attention and MLP are split
// along the sequence ([B, S/tp, width]): all-gather enters each parallel
// region and reduce-scatter leaves it (tensor_parallel.h).
// No dropout: the layouts must compute the same function as one process.
// Activation recomputation (recompute_policy.h): a block built with
// BlockRecompute::whole runs under Recompute (recompute.h) and keeps only
// its input; with ::attention_core only the attention core is recomputed.
// Either way the gradients are bitwise those of the block without it.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "trainer/parallel/recompute_policy.h"
#include "trainer/parallel/tensor_parallel.h"

namespace ctrun::trainer {

class ParallelMlpImpl : public torch::nn::Module {
 public:
  ParallelMlpImpl(const LayerContext& ctx, int64_t width, int64_t ffn);
  at::Tensor forward(const at::Tensor& x);

 private:
  Communicator* tp_;
  bool sequence_parallel_;
  ColumnParallelLinear fc1_{nullptr};
  RowParallelLinear fc2_{nullptr};
};
TORCH_MODULE(ParallelMlp);

class ParallelSelfAttentionImpl : public torch::nn::Module {
 public:
  // `recompute_core`: recompute the attention core in backward.
  ParallelSelfAttentionImpl(const LayerContext& ctx, int64_t width, int64_t heads, bool recompute_core = false);
  at::Tensor forward(const at::Tensor& x);

 private:
  Communicator* tp_;
  bool sequence_parallel_;
  bool recompute_core_;
  int64_t local_heads_, head_dim_;
  ColumnParallelLinear q_{nullptr}, k_{nullptr}, v_{nullptr};
  RowParallelLinear out_{nullptr};
};
TORCH_MODULE(ParallelSelfAttention);

class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(const LayerContext& ctx, int64_t width, int64_t heads, int64_t ffn,
                       BlockRecompute recompute = {});
  at::Tensor forward(const at::Tensor& x);

 private:
  at::Tensor Body(const at::Tensor& x);

  bool recompute_whole_;
  ReplicatedLayerNorm ln1_{nullptr}, ln2_{nullptr};
  ParallelSelfAttention attn_{nullptr};
  ParallelMlp mlp_{nullptr};
};
TORCH_MODULE(TransformerBlock);

}  // namespace ctrun::trainer
