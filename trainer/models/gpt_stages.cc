#include "trainer/models/gpt_stages.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>

namespace ctrun::trainer {

Result<std::vector<FsdpStage>> GptFsdpStages(GptStageImpl& model, Communicator* tp) {
  auto children = model.named_children();
  std::vector<FsdpStage> stages;
  if (model.first()) {
    auto embed = std::dynamic_pointer_cast<VocabParallelEmbeddingImpl>(children["embed"]);
    at::Tensor pos = model.named_parameters(/*recurse=*/false)["pos"];
    auto embedding = std::make_shared<torch::nn::Module>("GptEmbedding");
    embedding->register_module("embed", embed);
    embedding->register_parameter("pos", pos);
    stages.push_back({embedding, [embed, pos](const at::Tensor& tokens) {
                        return embed->forward(tokens) + pos.narrow(0, 0, tokens.size(1));
                      }});
  }
  for (const auto& child : children) {  // the blocks, in the stage's order
    auto block = std::dynamic_pointer_cast<TransformerBlockImpl>(child.value());
    if (block == nullptr) continue;
    stages.push_back({block, [block](const at::Tensor& h) { return block->forward(h); }});
  }
  if (model.last()) {
    auto ln_f = std::dynamic_pointer_cast<ReplicatedLayerNormImpl>(children["ln_f"]);
    auto head = std::dynamic_pointer_cast<ColumnParallelLinearImpl>(children["head"]);
    auto final_part = std::make_shared<torch::nn::Module>("GptHead");
    final_part->register_module("ln_f", ln_f);
    final_part->register_module("head", head);
    stages.push_back({final_part, [ln_f, head, tp](const at::Tensor& h) {
                        return head->forward(CopyToTp(ln_f->forward(h), tp));
                      }});
  }
  if (stages.empty()) return Status::InvalidArgument("GptFsdpStages: the stage holds no layer");
  return stages;
}

Result<std::vector<FsdpStage>> GptFsdpStages(GptChunksImpl& chunks, Communicator* tp) {
  std::vector<FsdpStage> stages;
  for (int c = 0; c < chunks.chunk_count(); ++c) {
    auto chunk = GptFsdpStages(chunks.chunk(c), tp);
    if (!chunk.ok()) return chunk.status();
    for (auto& stage : *chunk) stages.push_back(std::move(stage));
  }
  return stages;
}

}  // namespace ctrun::trainer
