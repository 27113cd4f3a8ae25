// Per-parameter optimizer state as named tensors, for the optimizers whose
// state is element-wise (so a flat shard's state can be cut and re-joined):
// SGD ("momentum_buffer") and Adam/AdamW ("exp_avg", "exp_avg_sq",
// "max_exp_avg_sq", and "step" as a one-element int64 tensor).
//
// Free functions; the optimizer and tensors are borrowed for the call.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

using ParamState = std::map<std::string, at::Tensor>;

// The state of `param` in `optimizer` (empty before its first step).
// InvalidArgument for optimizers other than SGD, Adam and AdamW.
Result<ParamState> GetParamState(const torch::optim::Optimizer& optimizer, const at::Tensor& param);

// Replaces the state of `param` with `state` (as GetParamState returns it;
// an empty map clears it). InvalidArgument for other optimizers, and InvalidArgument when a
// tensor the optimizer needs is missing.
Status SetParamState(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                     const ParamState& state);

// Bytes of tensor storage held in `optimizer`'s state (each storage once).
int64_t OptimizerStateBytes(const torch::optim::Optimizer& optimizer);

// A new optimizer of `like`'s type and first group's options over `params`
// (no state). InvalidArgument for other types than SGD, Adam and AdamW.
Result<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizerLike(
    const torch::optim::Optimizer& like, std::vector<at::Tensor> params);

}  // namespace ctrun::trainer
