#include "trainer/parallel/cpu_offload.h"

#include <ATen/ATen.h>

namespace ctrun::trainer {

Result<CpuOffload> ParseCpuOffload(const std::string& name) {
  if (name == "none") return CpuOffload::kNone;
  if (name == "params") return CpuOffload::kParams;
  if (name == "optimizer") return CpuOffload::kOptimizer;
  return Status::InvalidArgument("--cpu-offload '" + name + "': unknown (use none, params or optimizer)");
}

const char* CpuOffloadName(CpuOffload mode) {
  switch (mode) {
    case CpuOffload::kNone: return "none";
    case CpuOffload::kParams: return "params";
    case CpuOffload::kOptimizer: return "optimizer";
  }
  return "?";
}

at::Tensor ToHost(const at::Tensor& t, bool pin) {
  at::NoGradGuard no_grad;
  at::Tensor host =
      at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).device(at::kCPU).pinned_memory(pin));
  host.copy_(t.detach());
  return host;
}

at::Tensor ShardOnDevice(const at::Tensor& shard, at::Device device, at::ScalarType dtype) {
  at::Tensor source = shard.detach();
  if (source.device() == device && source.scalar_type() == dtype) return source;
  if (source.device() == device) return source.to(dtype);
  return source.to(at::TensorOptions().device(device).dtype(dtype), /*non_blocking=*/source.is_pinned());
}

at::Tensor GradLike(const at::Tensor& grad, const at::Tensor& param) {
  if (grad.device() == param.device()) return grad;
  return ToHost(grad, param.is_pinned());
}

OptimizerOffload::OptimizerOffload(std::vector<at::Tensor> device_params) : device_(std::move(device_params)) {
  for (const at::Tensor& param : device_) {
    at::Tensor host = ToHost(param, param.is_cuda());
    host.set_requires_grad(true);
    host_.push_back(host);
  }
}

void OptimizerOffload::PullGrads() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < device_.size(); ++i) {
    const at::Tensor& grad = device_[i].grad();
    if (!grad.defined()) continue;
    if (host_[i].grad().defined()) {
      host_[i].mutable_grad().copy_(grad);
    } else {
      host_[i].mutable_grad() = ToHost(grad, host_[i].is_pinned());
    }
  }
}

void OptimizerOffload::PushParams() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < device_.size(); ++i) {
    device_[i].detach().copy_(host_[i].detach());
  }
}

}  // namespace ctrun::trainer
