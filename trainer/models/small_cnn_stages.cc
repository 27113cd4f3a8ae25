#include "trainer/models/small_cnn_stages.h"

#include <ATen/ATen.h>

namespace ctrun::trainer {

std::vector<FsdpStage> SmallCnnStages(SmallCnnImpl& model) {
  auto children = model.named_children();
  auto conv1 = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(children["conv1"]);
  auto conv2 = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(children["conv2"]);
  auto fc1 = std::dynamic_pointer_cast<torch::nn::LinearImpl>(children["fc1"]);
  auto fc2 = std::dynamic_pointer_cast<torch::nn::LinearImpl>(children["fc2"]);
  return {
      {conv1, [conv1](const at::Tensor& x) { return at::max_pool2d(at::relu(conv1->forward(x)), {2, 2}); }},
      {conv2, [conv2](const at::Tensor& x) {
         return at::max_pool2d(at::relu(conv2->forward(x)), {2, 2}).flatten(1);
       }},
      {fc1, [fc1](const at::Tensor& x) { return at::relu(fc1->forward(x)); }},
      {fc2, [fc2](const at::Tensor& x) { return fc2->forward(x); }},
  };
}

}  // namespace ctrun::trainer
