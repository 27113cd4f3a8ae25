#include "trainer/models/small_cnn.h"

#include <ATen/ATen.h>

namespace ctrun::trainer {

SmallCnnImpl::SmallCnnImpl() {
  conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5)));
  conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5)));
  fc1_ = register_module("fc1", torch::nn::Linear(32 * 4 * 4, 128));
  fc2_ = register_module("fc2", torch::nn::Linear(128, 10));
}

at::Tensor SmallCnnImpl::forward(const at::Tensor& x) {
  at::Tensor h = at::max_pool2d(at::relu(conv1_->forward(x)), {2, 2});
  h = at::max_pool2d(at::relu(conv2_->forward(h)), {2, 2});
  h = at::relu(fc1_->forward(h.flatten(1)));
  return fc2_->forward(h);
}

}  // namespace ctrun::trainer
