// GptChunks: the part of the GPT one pipeline rank holds, as one module.
//
// With one chunk it is the rank's GptStage: stage s of p, its blocks by
// --pp-split or by count (StageLayers). With v chunks (interleaved 1F1B)
// chunk c is the GptStage of virtual stage c*p + s of p*v, holding the
// blocks ChunkLayers(...) gives (pipeline_chunks.h: Megatron's assignment,
// non-contiguous groups); the embedding is in stage 0's chunk 0, the head in
// stage p-1's chunk v-1.
//
// The container registers each chunk's submodules and direct parameters
// under their own names, which are global ("embed.weight", "block5.attn.q.
// weight"): its named_parameters() are those of a plain stage holding the
// same blocks, so checkpoints (by name), one DDP over all chunks, the
// optimizer and the tensor-parallel gradient sums see one module whatever
// the chunk count, and a checkpoint of one layout loads on any other.
//
// Lifetimes: as GptStage's (the tp Communicator in the context outlives
// it). Thread model: one thread.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

#include "trainer/models/gpt.h"

namespace ctrun::trainer {

class GptChunksImpl : public torch::nn::Module {
 public:
  // Requires virtual_stages >= 1; with more than one, `split` empty and
  // stages*virtual_stages <= config.layers.
  GptChunksImpl(const GptConfig& config, const LayerContext& ctx, int stage, int stages, int virtual_stages,
                const std::vector<int>& split);

  int chunk_count() const { return static_cast<int>(chunks_.size()); }
  // Chunk c (virtual stage c*p + s). Requires 0 <= c < chunk_count().
  GptStageImpl& chunk(int c) { return *chunks_[static_cast<size_t>(c)]; }
  // The chunks in order, for Pipeline; pointers into this module.
  std::vector<PipelineStage*> PipelineChunks();

  bool first() const { return chunks_.front()->first(); }  // holds the embedding
  bool last() const { return chunks_.back()->last(); }     // holds the head
  // The last chunk's loss. Requires last().
  at::Tensor Loss(const at::Tensor& logits, const at::Tensor& targets) const;

 private:
  std::vector<GptStage> chunks_;
};
TORCH_MODULE(GptChunks);

// "0-1" (one chunk) or "0-1 + 4-5": the blocks of each of `stage`'s chunks.
std::string StageBlocksText(int layers, int stages, int stage, int virtual_stages, const std::vector<int>& split);

}  // namespace ctrun::trainer
