// HealState: what a healing worker fetches from a peer at the quorum's max
// step (docs/fault-tolerance.md, "Healing"), as one opaque byte string: the
// module's parameters and buffers, the optimizer's per-parameter state
// (optimizer_state.h: SGD's momentum buffers, Adam's moments and step), the
// committed step, and torch's default CPU generator state. The samples of a
// step follow from the committed step (step_share.h), so no sampler
// position is needed.
//
// Format: a torch::serialize archive with "heal/version" (1), "heal/step",
// "heal/rng", "model/<name>" per parameter and buffer (or per FSDP shard:
// the caller names the tensors), and
// "optim/<i>/<key>" per optimizer parameter i (the optimizer's parameter
// groups in order) and state key. Loading checks every name, shape and dtype
// before it changes anything, and then copies: the model and optimizer end
// bitwise equal to the source's.
//
// Free functions; the module and optimizer are borrowed for the call. Call
// on the thread that trains (they touch the module's tensors).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer::ft {

// One named tensor of a healing state ("model/<name>" in the archive): a
// parameter, an FSDP shard, or a buffer.
struct HealTensor {
  std::string name;
  at::Tensor tensor;
  bool buffer = false;
};

// `module`'s named parameters, then its named buffers.
std::vector<HealTensor> HealTensorsOf(torch::nn::Module& module);

// The state of `tensors`, `optimizer`, `step` and the CPU generator.
// InvalidArgument for optimizers optimizer_state.h does not know.
Result<std::string> SaveHealState(const std::vector<HealTensor>& tensors, const torch::optim::Optimizer& optimizer,
                                  int64_t committed_step);
inline Result<std::string> SaveHealState(torch::nn::Module& module, const torch::optim::Optimizer& optimizer,
                                         int64_t committed_step) {
  return SaveHealState(HealTensorsOf(module), optimizer, committed_step);
}

// Loads `bytes` (as SaveHealState made them) into `tensors` (in place),
// `optimizer` and the CPU generator; returns the committed step.
// InvalidArgument, touching nothing, when the bytes do not parse or do not
// fit the tensors or optimizer (the message says what differs).
Result<int64_t> LoadHealState(const std::string& bytes, const std::vector<HealTensor>& tensors,
                              torch::optim::Optimizer& optimizer);
inline Result<int64_t> LoadHealState(const std::string& bytes, torch::nn::Module& module,
                                     torch::optim::Optimizer& optimizer) {
  return LoadHealState(bytes, HealTensorsOf(module), optimizer);
}

}  // namespace ctrun::trainer::ft
