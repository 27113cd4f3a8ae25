#include "trainer/ft/heal_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <array>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "trainer/checkpoint/optimizer_state.h"

namespace ctrun::trainer::ft {
namespace {

constexpr int64_t kHealStateVersion = 1;
// Every key optimizer_state.h uses; an archive holds those a parameter has.
constexpr std::array<const char*, 5> kHealOptimKeys = {"momentum_buffer", "exp_avg", "exp_avg_sq",
                                                       "max_exp_avg_sq", "step"};

at::Tensor HealCounter(int64_t value) { return at::full({1}, value, at::kLong); }

std::vector<at::Tensor> HealOptimParams(const torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> params;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) params.push_back(p);
  }
  return params;
}

std::string HealOptimKey(size_t i, const std::string& key) { return "optim/" + std::to_string(i) + "/" + key; }

Status HealMismatch(const std::string& what) {
  return Status::InvalidArgument("healing state does not fit this worker: " + what +
                                 " (do all replica groups run the same model and flags?)");
}

bool HealSameKind(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type();
}

// The archive's tensors for `tensors` (checked against them), in order.
Status ReadHealModel(torch::serialize::InputArchive& archive, const std::vector<HealTensor>& tensors,
                     std::vector<std::pair<at::Tensor, at::Tensor>>& copies) {
  for (const HealTensor& t : tensors) {
    at::Tensor theirs;
    if (!archive.try_read("model/" + t.name, theirs, t.buffer)) return HealMismatch("'" + t.name + "' is missing");
    if (!HealSameKind(theirs, t.tensor)) return HealMismatch("'" + t.name + "' has another shape or dtype");
    copies.emplace_back(t.tensor, theirs);
  }
  return Status::Ok();
}

// The archive's optimizer state per parameter, checked against the parameters.
Status ReadHealOptim(torch::serialize::InputArchive& archive, const std::vector<at::Tensor>& params,
                     std::vector<ParamState>& states) {
  at::Tensor count;
  if (!archive.try_read("optim/count", count) || count.item<int64_t>() != static_cast<int64_t>(params.size())) {
    return HealMismatch("the optimizer has another number of parameters");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    ParamState state;
    for (const char* key : kHealOptimKeys) {
      at::Tensor value;
      if (!archive.try_read(HealOptimKey(i, key), value)) continue;
      if (std::string(key) != "step" && !HealSameKind(value, params[i])) {
        return HealMismatch("optimizer state '" + std::string(key) + "' of parameter " + std::to_string(i) +
                            " has another shape or dtype");
      }
      state[key] = value;
    }
    states.push_back(std::move(state));
  }
  return Status::Ok();
}

}  // namespace

std::vector<HealTensor> HealTensorsOf(torch::nn::Module& module) {
  std::vector<HealTensor> out;
  for (const auto& item : module.named_parameters(true)) out.push_back({item.key(), item.value(), false});
  for (const auto& item : module.named_buffers(true)) out.push_back({item.key(), item.value(), true});
  return out;
}

Result<std::string> SaveHealState(const std::vector<HealTensor>& tensors, const torch::optim::Optimizer& optimizer,
                                  int64_t committed_step) {
  try {
    torch::serialize::OutputArchive archive;
    archive.write("heal/version", HealCounter(kHealStateVersion));
    archive.write("heal/step", HealCounter(committed_step));
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      archive.write("heal/rng", generator.get_state());
    }
    for (const HealTensor& t : tensors) archive.write("model/" + t.name, t.tensor.detach().cpu(), t.buffer);
    const std::vector<at::Tensor> params = HealOptimParams(optimizer);
    archive.write("optim/count", HealCounter(static_cast<int64_t>(params.size())));
    for (size_t i = 0; i < params.size(); ++i) {
      auto state = GetParamState(optimizer, params[i]);
      if (!state.ok()) return state.status();
      for (const auto& [key, value] : *state) archive.write(HealOptimKey(i, key), value.detach().cpu());
    }
    std::ostringstream out;
    archive.save_to(out);
    return out.str();
  } catch (const c10::Error& error) {
    return Status::Internal(std::string("cannot serialise the healing state: ") + error.what_without_backtrace());
  }
}

Result<int64_t> LoadHealState(const std::string& bytes, const std::vector<HealTensor>& tensors,
                              torch::optim::Optimizer& optimizer) {
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  std::vector<ParamState> states;
  const std::vector<at::Tensor> params = HealOptimParams(optimizer);
  at::Tensor version, step, rng;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data(), bytes.size());
    if (!archive.try_read("heal/version", version) || version.item<int64_t>() != kHealStateVersion ||
        !archive.try_read("heal/step", step) || !archive.try_read("heal/rng", rng)) {
      return Status::InvalidArgument("healing state of " + std::to_string(bytes.size()) +
                                     " bytes is not a version-1 healing state");
    }
    CTRUN_RETURN_IF_ERROR(ReadHealModel(archive, tensors, copies));
    CTRUN_RETURN_IF_ERROR(ReadHealOptim(archive, params, states));
  } catch (const c10::Error& error) {
    return Status::InvalidArgument("healing state of " + std::to_string(bytes.size()) +
                                   " bytes does not parse: " + std::string(error.what_without_backtrace()));
  }
  {
    at::NoGradGuard no_grad;
    for (auto& [mine, theirs] : copies) mine.copy_(theirs);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    ParamState state;
    for (const auto& [key, value] : states[i]) state[key] = value.to(params[i].device());
    CTRUN_RETURN_IF_ERROR(SetParamState(optimizer, params[i], state));
  }
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(rng);
  }
  return step.item<int64_t>();
}

}  // namespace ctrun::trainer::ft
