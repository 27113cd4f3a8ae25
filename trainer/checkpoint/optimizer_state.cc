#include "trainer/checkpoint/optimizer_state.h"

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <set>
#include <sstream>
#include <type_traits>

namespace ctrun::trainer {
namespace {

// An optimizer keeps each parameter's state under its TensorImpl: torch 1.x
// keys the map with the pointer printed as text, torch 2.x with the pointer.
using StateKey = std::remove_cvref_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

// (A template, so that only the branch for this torch's key is compiled.)
template <typename K = StateKey>
K Key(const at::Tensor& param) {
  if constexpr (std::is_same_v<K, std::string>) {
    std::ostringstream text;
    text << param.unsafeGetTensorImpl();
    return text.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}

Status Unsupported() {
  return Status::InvalidArgument(
      "sharded optimizer state: only SGD, Adam and AdamW are supported (their state is "
      "element-wise); use one of them with FSDP/ZeRO");
}

template <typename State>
void AdamGet(const State& s, ParamState& out) {
  out["step"] = at::scalar_tensor(s.step(), at::kLong).reshape({1});
  out["exp_avg"] = s.exp_avg();
  out["exp_avg_sq"] = s.exp_avg_sq();
  if (s.max_exp_avg_sq().defined()) out["max_exp_avg_sq"] = s.max_exp_avg_sq();
}

template <typename State>
Status AdamSet(const ParamState& in, std::unique_ptr<torch::optim::OptimizerParamState>& slot) {
  for (const char* key : {"step", "exp_avg", "exp_avg_sq"}) {
    if (!in.count(key)) {
      return Status::InvalidArgument(std::string("optimizer state: '") + key + "' missing");
    }
  }
  auto state = std::make_unique<State>();
  state->step(in.at("step").item<int64_t>());
  state->exp_avg(in.at("exp_avg"));
  state->exp_avg_sq(in.at("exp_avg_sq"));
  if (in.count("max_exp_avg_sq")) state->max_exp_avg_sq(in.at("max_exp_avg_sq"));
  slot = std::move(state);
  return Status::Ok();
}

}  // namespace

Result<ParamState> GetParamState(const torch::optim::Optimizer& optimizer,
                                 const at::Tensor& param) {
  ParamState out;
  const bool sgd = dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr;
  const bool adam = dynamic_cast<const torch::optim::Adam*>(&optimizer) != nullptr;
  const bool adamw = dynamic_cast<const torch::optim::AdamW*>(&optimizer) != nullptr;
  if (!sgd && !adam && !adamw) return Unsupported();
  auto it = optimizer.state().find(Key(param));
  if (it == optimizer.state().end()) return out;
  if (sgd) {
    const auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
    if (s.momentum_buffer().defined()) out["momentum_buffer"] = s.momentum_buffer();
  } else if (adam) {
    AdamGet(static_cast<const torch::optim::AdamParamState&>(*it->second), out);
  } else {
    AdamGet(static_cast<const torch::optim::AdamWParamState&>(*it->second), out);
  }
  return out;
}

Status SetParamState(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                     const ParamState& state) {
  const bool sgd = dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr;
  const bool adam = dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr;
  const bool adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  if (!sgd && !adam && !adamw) return Unsupported();
  const StateKey key = Key(param);
  if (state.empty()) {
    optimizer.state().erase(key);
    return Status::Ok();
  }
  auto& slot = optimizer.state()[key];
  if (sgd) {
    if (!state.count("momentum_buffer")) {
      return Status::InvalidArgument("optimizer state: 'momentum_buffer' missing");
    }
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(state.at("momentum_buffer"));
    slot = std::move(s);
    return Status::Ok();
  }
  if (adam) return AdamSet<torch::optim::AdamParamState>(state, slot);
  return AdamSet<torch::optim::AdamWParamState>(state, slot);
}

int64_t OptimizerStateBytes(const torch::optim::Optimizer& optimizer) {
  std::set<const void*> seen;
  int64_t bytes = 0;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& param : group.params()) {
      auto state = GetParamState(optimizer, param);
      if (!state.ok()) continue;
      for (const auto& [name, tensor] : *state) {
        if (name == "step" || !tensor.defined()) continue;  // a scalar, not per element
        const auto& storage = tensor.storage();
        if (seen.insert(storage.data()).second) bytes += static_cast<int64_t>(storage.nbytes());
      }
    }
  }
  return bytes;
}

Result<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizerLike(
    const torch::optim::Optimizer& like, std::vector<at::Tensor> params) {
  const auto& options = like.param_groups().at(0).options();
  if (dynamic_cast<const torch::optim::SGD*>(&like)) {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::SGD>(
        std::move(params), static_cast<const torch::optim::SGDOptions&>(options)));
  }
  if (dynamic_cast<const torch::optim::AdamW*>(&like)) {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::AdamW>(
        std::move(params), static_cast<const torch::optim::AdamWOptions&>(options)));
  }
  if (dynamic_cast<const torch::optim::Adam*>(&like)) {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::Adam>(
        std::move(params), static_cast<const torch::optim::AdamOptions&>(options)));
  }
  return Unsupported();
}

}  // namespace ctrun::trainer
