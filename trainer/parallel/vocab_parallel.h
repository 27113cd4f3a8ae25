// The vocabulary split over the tensor-parallel group: the token embedding
// and the cross-entropy over logits that no rank holds whole.
//
// Rank r of tp holds vocabulary rows [r*V/tp, (r+1)*V/tp). Same thread model
// and failure behaviour as tensor_parallel.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "trainer/parallel/tensor_parallel.h"

namespace ctrun::trainer {

// Token ids [B, S] -> embeddings [B, S, width], replicated over tp (with
// sequence parallel: this rank's part of the sequence, [B, S/tp, width]).
// Each rank looks up the tokens in its rows (zeros elsewhere); the partial
// results are summed over tp.
class VocabParallelEmbeddingImpl : public torch::nn::Module {
 public:
  VocabParallelEmbeddingImpl(const LayerContext& ctx, int64_t vocab, int64_t width);
  at::Tensor forward(const at::Tensor& tokens);
  at::Tensor weight;

 private:
  Communicator* tp_;
  bool sequence_parallel_;
  int64_t vocab_start_, vocab_end_;
};
TORCH_MODULE(VocabParallelEmbedding);

// Per-token cross-entropy of logits cut by vocabulary: `logits` [N, V/tp]
// (this rank's columns, vocabulary offset `vocab_start`), `targets` [N]
// (global ids). Returns [N] losses, equal on every tp rank; differentiable
// in `logits` (the gradient is softmax - one_hot, each rank its columns).
// Three all-reduces over tp of [N] values: max, sum of exp, target logit.
at::Tensor VocabParallelCrossEntropy(const at::Tensor& logits, const at::Tensor& targets, int64_t vocab_start,
                                     Communicator* tp);

}  // namespace ctrun::trainer
