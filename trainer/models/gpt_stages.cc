#include "trainer/models/gpt_stages.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>

namespace ctrun::trainer {

Result<std::vector<FsdpStage>> GptFsdpStages(GptStageImpl& model, Communicator* tp) {
  if (!model.first() || !model.last()) {
    return Status::InvalidArgument("FSDP wraps a GPT built as one pipeline stage (pp = 1) only");
  }
  auto children = model.named_children();
  auto embed = std::dynamic_pointer_cast<VocabParallelEmbeddingImpl>(children["embed"]);
  auto ln_f = std::dynamic_pointer_cast<ReplicatedLayerNormImpl>(children["ln_f"]);
  auto head = std::dynamic_pointer_cast<ColumnParallelLinearImpl>(children["head"]);
  at::Tensor pos = model.named_parameters(/*recurse=*/false)["pos"];

  auto embedding = std::make_shared<torch::nn::Module>("GptEmbedding");
  embedding->register_module("embed", embed);
  embedding->register_parameter("pos", pos);
  std::vector<FsdpStage> stages;
  stages.push_back({embedding, [embed, pos](const at::Tensor& tokens) {
                      return embed->forward(tokens) + pos.narrow(0, 0, tokens.size(1));
                    }});
  for (int layer = 0;; ++layer) {
    const auto* child = children.find("block" + std::to_string(layer));
    if (child == nullptr) break;
    auto block = std::dynamic_pointer_cast<TransformerBlockImpl>(*child);
    stages.push_back({block, [block](const at::Tensor& h) { return block->forward(h); }});
  }
  auto final_part = std::make_shared<torch::nn::Module>("GptHead");
  final_part->register_module("ln_f", ln_f);
  final_part->register_module("head", head);
  stages.push_back({final_part, [ln_f, head, tp](const at::Tensor& h) {
                      return head->forward(CopyToTp(ln_f->forward(h), tp));
                    }});
  return stages;
}

}  // namespace ctrun::trainer
