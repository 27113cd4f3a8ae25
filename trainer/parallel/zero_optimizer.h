// ZeroRedundancyOptimizer: ZeRO-1 for the DDP path (PyTorch's
// ZeroRedundancyOptimizer's role). Parameters and gradients stay whole on
// every rank (DDP all-reduces the gradients); the optimizer state is sharded.
//
// The module's trainable parameters are moved into one flat float32 buffer
// padded to a multiple of the world size N (flat_param.h; the parameters
// become views of it); each rank's shard is its 1/N of that buffer (no
// copy) and the optimizer runs over the shard only. Step() copies this rank's
// part of the averaged gradients into the shard's .grad (freed again after
// the step), steps, and all-gathers the shards into the buffer. Exact for element-wise optimizers (SGD,
// Adam, AdamW); wire cost per step: one all-gather of the parameters on top
// of DDP's all-reduce (PyTorch broadcasts each rank's partition: the same
// volume).
//
// Lifetimes: `module` and `comm` must outlive this object. Not copyable. One
// thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "base/result.h"
#include "trainer/comm/communicator.h"
#include "trainer/parallel/flat_param.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

class ZeroRedundancyOptimizer {
 public:
  // Makes the optimizer (over this rank's shard) with `make`.
  using OptimizerFactory =
      std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>;

  // Takes this rank's shard from `module`'s current parameters, which must
  // already be equal on all ranks (create it after DistributedDataParallel,
  // which broadcasts them). Returns the wrapper, or InvalidArgument when the
  // module has no trainable parameter or one that is not float32.
  static Result<std::unique_ptr<ZeroRedundancyOptimizer>> Create(torch::nn::Module& module,
                                                                 Communicator& comm,
                                                                 const OptimizerFactory& make);
  ~ZeroRedundancyOptimizer();
  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  // After gradients are averaged: steps the shard and updates the module's
  // parameters on every rank. Unavailable when the all-gather fails.
  Status Step();
  // Zeroes the module's gradients.
  void ZeroGrad();

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const at::Tensor& shard() const { return shard_; }
  const FlatLayout& layout() const { return layout_; }

 private:
  ZeroRedundancyOptimizer(Communicator& comm, std::vector<at::Tensor> params, FlatLayout layout);

  Communicator& comm_;
  std::vector<at::Tensor> params_;  // the module's trainable parameters, layout order
  FlatLayout layout_;
  at::Tensor flat_;                 // all parameters, padded
  at::Tensor shard_;                // this rank's part of flat_'s storage, requires grad
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace ctrun::trainer
