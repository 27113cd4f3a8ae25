// CPU offload for FSDP (ctrun-gpt --cpu-offload), with the semantics of
// PyTorch FSDP's CPUOffload(offload_params=True) and of ZeRO-Offload:
//
//  - kParams: each unit's float32 parameter shard (the master weights), its
//    gradient and therefore the optimizer's state live in host memory
//    (page-locked when the device is CUDA, so the copies are DMA). FSDP
//    copies a shard to the device just before its all-gather (StartGather),
//    reduce-scatters gradients on the device and copies the reduced shard
//    back to the host (FinishReduction); the optimizer steps on the host.
//    These are FSDP's hooks: FsdpOptions::offload_params (fsdp.h) calls the
//    helpers below.
//  - kOptimizer: the shards and their gradients stay on the device; the
//    optimizer is given host copies of the shards (OptimizerOffload), so
//    its state lives and its step runs on the host: after backward the
//    gradients are copied to the host copies (PullGrads), the optimizer
//    steps there, and the updated values are copied back (PushParams).
//
// On a CPU-only run "host" and "device" are both the CPU: the data is then
// copied (kParams: a separate shard; kOptimizer: separate host copies), and
// training is bitwise the same as without offload, which the unit tests
// check. ctrun-gpt refuses --cpu-offload with --backend gloo (the parameters
// already live in CPU memory).
//
// Free functions and one class; no threads. Copies to the host are
// synchronous; copies from page-locked memory to the device are issued
// non-blocking on the current stream, which the collectives that read them
// wait for (c10d's NCCL streams wait on the current one).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

enum class CpuOffload { kNone, kParams, kOptimizer };

// "none", "params" or "optimizer"; InvalidArgument naming the value otherwise.
Result<CpuOffload> ParseCpuOffload(const std::string& name);
const char* CpuOffloadName(CpuOffload mode);

// A host copy of `t` (same dtype and shape, contiguous, detached), in
// page-locked memory when `pin`, else pageable.
at::Tensor ToHost(const at::Tensor& t, bool pin);

// `shard` as the all-gather's source: `shard` itself (detached) when it is
// already on `device` in `dtype`, else a copy there (non-blocking from
// page-locked memory).
at::Tensor ShardOnDevice(const at::Tensor& shard, at::Device device, at::ScalarType dtype);

// `grad` placed where `param` lives: `grad` itself when on the same device,
// else a host copy (page-locked when `param` is).
at::Tensor GradLike(const at::Tensor& grad, const at::Tensor& param);

// --cpu-offload optimizer: host copies of the parameters the optimizer
// steps instead of the device ones. Borrows the device tensors (they must
// outlive it); the host copies are its own.
class OptimizerOffload {
 public:
  explicit OptimizerOffload(std::vector<at::Tensor> device_params);

  // The host copies (float32 leaves requiring grad), for the optimizer.
  const std::vector<at::Tensor>& host_params() const { return host_; }
  // Copies each device parameter's .grad to its host copy's .grad (an
  // undefined device gradient leaves the host one undefined).
  void PullGrads();
  // Copies the host copies' values to the device parameters.
  void PushParams();

 private:
  std::vector<at::Tensor> device_, host_;
};

}  // namespace ctrun::trainer
