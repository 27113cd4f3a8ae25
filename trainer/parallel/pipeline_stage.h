// PipelineStage: what a Pipeline needs of the model part it runs — the
// interface models implement (trainer/models/gpt.h's GptStageImpl), so that
// parallel/ never names a model.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ctrun::trainer {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;

  // Stage 0 takes the batch's input; the others the previous stage's
  // output. Returns this stage's output (the last stage's: its logits).
  virtual at::Tensor Forward(const at::Tensor& input) = 0;
  // Mean loss of the last stage's `output` against `targets`. Requires last().
  virtual at::Tensor Loss(const at::Tensor& output, const at::Tensor& targets) const = 0;
  // The shape of this stage's input activation for `batch` rows (stages > 0).
  virtual std::vector<int64_t> ActivationShape(int64_t batch) const = 0;
  virtual bool first() const = 0;
  virtual bool last() const = 0;
};

}  // namespace ctrun::trainer
