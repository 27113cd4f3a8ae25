#include "trainer/models/gpt_chunks.h"

#include <string>

#include "trainer/comm/mesh_shape.h"
#include "trainer/parallel/pipeline_chunks.h"

namespace ctrun::trainer {

GptChunksImpl::GptChunksImpl(const GptConfig& config, const LayerContext& ctx, int stage, int stages,
                             int virtual_stages, const std::vector<int>& split) {
  if (virtual_stages == 1) {
    const auto layers = StageLayers(static_cast<int>(config.layers), stages, stage, split);
    chunks_.push_back(GptStage(config, ctx, stage, stages, layers[0], layers[1]));
  } else {
    for (int c = 0; c < virtual_stages; ++c) {
      const auto layers = ChunkLayers(static_cast<int>(config.layers), stages, virtual_stages, stage, c);
      chunks_.push_back(GptStage(config, ctx, VirtualStage(stages, stage, c), stages * virtual_stages, layers[0],
                                 layers[1]));
    }
  }
  // The same tensors and submodules, under their global names.
  for (const GptStage& chunk : chunks_) {
    for (const auto& item : chunk->named_children()) register_module(item.key(), item.value());
    for (const auto& item : chunk->named_parameters(/*recurse=*/false)) register_parameter(item.key(), item.value());
    for (const auto& item : chunk->named_buffers(/*recurse=*/false)) register_buffer(item.key(), item.value());
  }
}

std::vector<PipelineStage*> GptChunksImpl::PipelineChunks() {
  std::vector<PipelineStage*> out;
  for (GptStage& chunk : chunks_) out.push_back(chunk.get());
  return out;
}

at::Tensor GptChunksImpl::Loss(const at::Tensor& logits, const at::Tensor& targets) const {
  return chunks_.back()->Loss(logits, targets);
}

std::string StageBlocksText(int layers, int stages, int stage, int virtual_stages, const std::vector<int>& split) {
  if (virtual_stages > 1) return ChunkBlocksText(layers, stages, virtual_stages, stage);
  const auto range = StageLayers(layers, stages, stage, split);
  return std::to_string(range[0]) + "-" + std::to_string(range[1] - 1);
}

}  // namespace ctrun::trainer
