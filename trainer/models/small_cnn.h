// SmallCnn: the example 28x28 classifier (conv 1->16 5x5, ReLU, max-pool 2,
// conv 16->32 5x5, ReLU, max-pool 2, linear 512->128, ReLU, linear 128->10).
// No dropout or batch norm, so training is deterministic given the data
// order and thread count. Standard libtorch module holder (shared
// ownership).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace ctrun::trainer {

class SmallCnnImpl : public torch::nn::Module {
 public:
  SmallCnnImpl();
  // [N, 1, 28, 28] float -> [N, 10] logits.
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::Conv2d conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr};
  torch::nn::Linear fc2_{nullptr};
};
TORCH_MODULE(SmallCnn);

}  // namespace ctrun::trainer
