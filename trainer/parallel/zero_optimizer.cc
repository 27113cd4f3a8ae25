#include "trainer/parallel/zero_optimizer.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <algorithm>

namespace ctrun::trainer {

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(Communicator& comm, std::vector<at::Tensor> params,
                                                 FlatLayout layout)
    : comm_(comm), params_(std::move(params)), layout_(std::move(layout)) {}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() = default;

Result<std::unique_ptr<ZeroRedundancyOptimizer>> ZeroRedundancyOptimizer::Create(
    torch::nn::Module& module, Communicator& comm, const OptimizerFactory& make) {
  std::vector<at::Tensor> params;
  std::vector<FlatEntry> entries;
  for (const auto& item : module.named_parameters(true)) {
    if (!item.value().requires_grad()) continue;
    if (item.value().scalar_type() != at::kFloat) {
      return Status::InvalidArgument("ZeRO-1: parameter '" + item.key() +
                                     "' is not float32; only float32 parameters are sharded");
    }
    params.push_back(item.value());
    entries.push_back({item.key(), item.value().sizes().vec(), 0, 0});
  }
  if (params.empty()) {
    return Status::InvalidArgument("ZeRO-1: the module has no parameter that requires grad");
  }
  std::unique_ptr<ZeroRedundancyOptimizer> zero(new ZeroRedundancyOptimizer(
      comm, std::move(params), MakeFlatLayout(std::move(entries), comm.size())));
  at::NoGradGuard no_grad;
  const FlatLayout& layout = zero->layout_;
  // The parameters become views of one flat buffer and the shard another
  // tensor on the same storage: the optimizer updates the parameters in
  // place, and no master copy exists.
  zero->flat_ = at::zeros({layout.padded_numel}, zero->params_.front().options().requires_grad(false));
  for (size_t i = 0; i < zero->params_.size(); ++i) {
    const FlatEntry& entry = layout.entries[i];
    at::Tensor view = zero->flat_.narrow(0, entry.offset, entry.numel).view(entry.shape);
    view.copy_(zero->params_[i].detach());
    zero->params_[i].set_data(view);
  }
  zero->shard_ = at::empty({0}, zero->flat_.options());
  zero->shard_.set_(zero->flat_.storage(), comm.rank() * layout.shard_numel, {layout.shard_numel}, {1});
  zero->shard_.set_requires_grad(true);
  zero->optimizer_ = make({zero->shard_});
  return zero;
}

void ZeroRedundancyOptimizer::ZeroGrad() {
  at::NoGradGuard no_grad;
  for (auto& param : params_) {
    if (param.grad().defined()) param.mutable_grad().zero_();
  }
}

Status ZeroRedundancyOptimizer::Step() {
  at::NoGradGuard no_grad;
  const int64_t base = comm_.rank() * layout_.shard_numel;
  at::Tensor grad = at::zeros_like(shard_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const FlatEntry& entry = layout_.entries[i];
    const int64_t begin = std::max(entry.offset, base);
    const int64_t end = std::min(entry.offset + entry.numel, base + layout_.shard_numel);
    if (begin >= end || !params_[i].grad().defined()) continue;
    grad.narrow(0, begin - base, end - begin)
        .copy_(params_[i].grad().reshape({-1}).narrow(0, begin - entry.offset, end - begin));
  }
  shard_.mutable_grad() = grad;
  optimizer_->step();
  shard_.mutable_grad() = at::Tensor();
  // In place: this rank's chunk of flat_ is the shard itself.
  at::Tensor send = shard_.detach().clone();
  return WaitWork(comm_.AllGather(send, flat_), "all-gather of parameters (ZeRO-1)");
}

}  // namespace ctrun::trainer
