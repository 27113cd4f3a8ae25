// A small GPT-style decoder, built as the pipeline stage this rank runs and
// cut over its tensor-parallel group:
//
//   stage 0:       token embedding (vocabulary-parallel) + learned positions
//   every stage:   its transformer blocks [first_layer, last_layer)
//   last stage:    final LayerNorm, LM head (column-parallel over the
//                  vocabulary), vocabulary-parallel cross-entropy
//
// Parameter names are global ("embed.weight", "block3.attn.q.weight",
// "head.weight"), whatever the stage, so checkpoints re-shard by name, and
// every layout is initialised from the same full weights (InitShard).
//
// Lifetimes: the tp Communicator in the context must outlive the stage.
// Thread model: one thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "trainer/comm/mesh_shape.h"
#include "trainer/parallel/parallel_blocks.h"
#include "trainer/parallel/pipeline_stage.h"
#include "trainer/parallel/recompute_policy.h"
#include "trainer/parallel/tensor_parallel.h"
#include "trainer/parallel/vocab_parallel.h"

namespace ctrun::trainer {

struct GptConfig {
  int64_t vocab = 128;
  int64_t width = 64;
  int64_t heads = 4;
  int64_t layers = 4;
  int64_t seq_len = 32;
  // Activation recomputation of every transformer block (recompute_policy.h);
  // the gradients are the same bitwise whichever.
  RecomputePolicy recompute = RecomputePolicy::kNone;
  int64_t ffn() const { return 4 * width; }
};

class GptStageImpl : public torch::nn::Module, public PipelineStage {
 public:
  // Builds stage `stage` of `stages` holding blocks [first_layer, last_layer).
  // `ctx.name` is ignored (names are global); its registry receives every
  // parameter's ShardSpec.
  GptStageImpl(const GptConfig& config, const LayerContext& ctx, int stage, int stages, int first_layer,
               int last_layer);

  // Stage 0 takes token ids [B, S] (int64); the others the previous stage's
  // output. The last stage returns this rank's logits [B, S, vocab/tp];
  // the others the hidden state ([B, S, width], or [B, S/tp, width] with
  // sequence parallel).
  // forward is torch's module convention; Forward is PipelineStage's.
  at::Tensor forward(const at::Tensor& input);
  at::Tensor Forward(const at::Tensor& input) override { return forward(input); }
  // Mean cross-entropy of the last stage's `logits` against `targets`
  // [B, S] (vocabulary-parallel). Requires last().
  at::Tensor Loss(const at::Tensor& logits, const at::Tensor& targets) const override;

  // The shape of this stage's input activation for `batch` sequences
  // (stages > 0).
  std::vector<int64_t> ActivationShape(int64_t batch) const override;

  bool first() const override { return stage_ == 0; }
  bool last() const override { return stage_ == stages_ - 1; }

 private:
  GptConfig config_;
  Communicator* tp_;
  bool sequence_parallel_;
  int tp_rank_, tp_size_;
  int stage_, stages_;
  VocabParallelEmbedding embed_{nullptr};
  at::Tensor pos_;
  std::vector<TransformerBlock> blocks_;
  ReplicatedLayerNorm ln_f_{nullptr};
  ColumnParallelLinear head_{nullptr};
};
TORCH_MODULE(GptStage);

// What the model lets the mesh divide (for CheckMeshShape).
MeshModelLimits GptLimits(const GptConfig& config, int global_batch, int micro_batches);

}  // namespace ctrun::trainer
