#include "trainer/models/gpt.h"

#include <ATen/ATen.h>

namespace ctrun::trainer {

GptStageImpl::GptStageImpl(const GptConfig& config, const LayerContext& ctx, int stage, int stages,
                           int first_layer, int last_layer)
    : config_(config), tp_(ctx.tp), sequence_parallel_(ctx.sequence_parallel && ctx.tp_size() > 1),
      tp_rank_(ctx.tp_rank()), tp_size_(ctx.tp_size()), stage_(stage), stages_(stages) {
  LayerContext root = ctx;
  root.name.clear();
  if (first()) {
    embed_ = register_module("embed", VocabParallelEmbedding(root.Child("embed"), config.vocab, config.width));
    pos_ = register_parameter("pos", InitShard("pos", {{config.seq_len, config.width}, -1, 0, 1, sequence_parallel_},
                                               InitKind::kNormal, ctx.seed, *ctx.registry));
  }
  for (int layer = first_layer; layer < last_layer; ++layer) {
    const std::string name = "block" + std::to_string(layer);
    blocks_.push_back(register_module(
        name, TransformerBlock(root.Child(name), config.width, config.heads, config.ffn(),
                               RecomputeForBlock(config.recompute))));
  }
  if (last()) {
    ln_f_ = register_module("ln_f", ReplicatedLayerNorm(root.Child("ln_f"), config.width));
    head_ = register_module("head", ColumnParallelLinear(root.Child("head"), config.width, config.vocab,
                                                         /*bias=*/false));
  }
}

at::Tensor GptStageImpl::forward(const at::Tensor& input) {
  at::Tensor h = input;
  if (first()) {
    const int64_t seq = input.size(1);
    at::Tensor pos = pos_.narrow(0, 0, seq);
    if (sequence_parallel_) pos = pos.narrow(0, tp_rank_ * (seq / tp_size_), seq / tp_size_);
    h = embed_(input) + pos;
  }
  for (auto& block : blocks_) h = block(h);
  if (!last()) return h;
  h = ln_f_(h);
  h = sequence_parallel_ ? GatherSequence(h, tp_) : CopyToTp(h, tp_);
  return head_(h);
}

at::Tensor GptStageImpl::Loss(const at::Tensor& logits, const at::Tensor& targets) const {
  const int64_t local_vocab = logits.size(-1);
  at::Tensor losses = VocabParallelCrossEntropy(logits.reshape({-1, local_vocab}), targets.reshape({-1}),
                                                local_vocab * tp_rank_, tp_);
  return losses.mean();
}

std::vector<int64_t> GptStageImpl::ActivationShape(int64_t batch) const {
  return {batch, sequence_parallel_ ? config_.seq_len / tp_size_ : config_.seq_len, config_.width};
}

MeshModelLimits GptLimits(const GptConfig& config, int global_batch, int micro_batches) {
  return MeshModelLimits{.heads = static_cast<int>(config.heads),
                         .hidden = static_cast<int>(config.width),
                         .ffn_hidden = static_cast<int>(config.ffn()),
                         .vocab = static_cast<int>(config.vocab),
                         .layers = static_cast<int>(config.layers),
                         .global_batch = global_batch,
                         .micro_batches = micro_batches};
}

}  // namespace ctrun::trainer
