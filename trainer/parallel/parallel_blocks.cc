#include "trainer/parallel/parallel_blocks.h"

#include <ATen/ATen.h>

#include <vector>

#include "trainer/parallel/attention_core.h"
#include "trainer/parallel/recompute.h"

namespace ctrun::trainer {
namespace {

// Enters a tensor-parallel region: the whole activation on every tp rank.
at::Tensor EnterRegion(const at::Tensor& x, Communicator* tp, bool sequence_parallel) {
  return sequence_parallel ? GatherSequence(x, tp) : CopyToTp(x, tp);
}

}  // namespace

ParallelMlpImpl::ParallelMlpImpl(const LayerContext& ctx, int64_t width, int64_t ffn)
    : tp_(ctx.tp), sequence_parallel_(ctx.sequence_parallel) {
  fc1_ = register_module("fc1", ColumnParallelLinear(ctx.Child("fc1"), width, ffn));
  fc2_ = register_module("fc2", RowParallelLinear(ctx.Child("fc2"), ffn, width));
}

at::Tensor ParallelMlpImpl::forward(const at::Tensor& x) {
  return fc2_(at::gelu(fc1_(EnterRegion(x, tp_, sequence_parallel_))));
}

ParallelSelfAttentionImpl::ParallelSelfAttentionImpl(const LayerContext& ctx, int64_t width, int64_t heads,
                                                     bool recompute_core)
    : tp_(ctx.tp), sequence_parallel_(ctx.sequence_parallel), recompute_core_(recompute_core),
      local_heads_(heads / ctx.tp_size()),
      head_dim_(width / heads) {
  q_ = register_module("q", ColumnParallelLinear(ctx.Child("q"), width, width));
  k_ = register_module("k", ColumnParallelLinear(ctx.Child("k"), width, width));
  v_ = register_module("v", ColumnParallelLinear(ctx.Child("v"), width, width));
  out_ = register_module("out", RowParallelLinear(ctx.Child("out"), width, width));
}

at::Tensor ParallelSelfAttentionImpl::forward(const at::Tensor& x) {
  at::Tensor h = EnterRegion(x, tp_, sequence_parallel_);
  const int64_t batch = h.size(0), seq = h.size(1);
  auto split_heads = [&](const at::Tensor& t) {
    return t.view({batch, seq, local_heads_, head_dim_}).transpose(1, 2);  // [B, heads, S, hd]
  };
  at::Tensor q = split_heads(q_(h)), k = split_heads(k_(h)), v = split_heads(v_(h));
  at::Tensor context =  // [B, heads, S, hd]
      recompute_core_ ? Recompute(AttentionCore, {q, k, v}, {})[0] : AttentionCore({q, k, v})[0];
  return out_(context.transpose(1, 2).reshape({batch, seq, local_heads_ * head_dim_}));
}

TransformerBlockImpl::TransformerBlockImpl(const LayerContext& ctx, int64_t width, int64_t heads, int64_t ffn,
                                           BlockRecompute recompute)
    : recompute_whole_(recompute.whole) {
  ln1_ = register_module("ln1", ReplicatedLayerNorm(ctx.Child("ln1"), width));
  attn_ = register_module("attn", ParallelSelfAttention(ctx.Child("attn"), width, heads, recompute.attention_core));
  ln2_ = register_module("ln2", ReplicatedLayerNorm(ctx.Child("ln2"), width));
  mlp_ = register_module("mlp", ParallelMlp(ctx.Child("mlp"), width, ffn));
}

at::Tensor TransformerBlockImpl::forward(const at::Tensor& x) {
  if (!recompute_whole_) return Body(x);
  auto body = [this](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{Body(in[0])}; };
  return Recompute(body, {x}, parameters())[0];
}

at::Tensor TransformerBlockImpl::Body(const at::Tensor& x) {
  at::Tensor h = x + attn_(ln1_(x));
  return h + mlp_(ln2_(h));
}

}  // namespace ctrun::trainer
