#include "trainer/parallel/grad_scaler.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <sstream>
#include <vector>

namespace ctrun::trainer {
namespace {

std::string Num(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

Status Bad(const std::string& what, const std::string& field, const std::string& rule, double value) {
  return Status::InvalidArgument(what + ": " + field + " must be " + rule + ", got " + Num(value));
}

// The defined gradients of `optimizer`'s parameters, in group order.
Result<std::vector<at::Tensor>> Gradients(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> grads;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      const at::Tensor& grad = param.grad();
      if (!grad.defined()) continue;
      if (grad.is_sparse()) {
        return Status::InvalidArgument("GradScaler: sparse gradients are not supported");
      }
      grads.push_back(grad);
    }
  }
  return grads;
}

// One element of `state` as a double: InvalidArgument naming `key` when it
// is missing or not one element.
Result<double> Element(const GradScalerState& state, const std::string& key) {
  auto it = state.find(key);
  if (it == state.end() || !it->second.defined()) {
    return Status::InvalidArgument("GradScaler state: \"" + key + "\" is missing");
  }
  if (it->second.numel() != 1) {
    return Status::InvalidArgument("GradScaler state: \"" + key + "\" must hold one element, has " +
                                   std::to_string(it->second.numel()));
  }
  return it->second.to(at::kCPU).to(at::kDouble).item<double>();
}

Result<int64_t> Integer(const GradScalerState& state, const std::string& key) {
  Result<double> value = Element(state, key);
  if (!value.ok()) return value.status();
  if (!std::isfinite(*value) || std::floor(*value) != *value) {
    return Status::InvalidArgument("GradScaler state: \"" + key + "\" must be an integer, got " + Num(*value));
  }
  return static_cast<int64_t>(*value);
}

// InvalidArgument "<what>: <field> must be ..." for the first field out of
// range; the scale's field is called `scale_field`.
Status Validate(const GradScalerOptions& options, const std::string& what, const std::string& scale_field) {
  if (!(options.init_scale > 0) || !std::isfinite(static_cast<float>(options.init_scale))) {
    return Bad(what, scale_field, "> 0 and finite in float32", options.init_scale);
  }
  if (!(options.growth_factor > 1) || !std::isfinite(options.growth_factor)) {
    return Bad(what, "growth_factor", "> 1", options.growth_factor);
  }
  if (!(options.backoff_factor > 0 && options.backoff_factor < 1)) {
    return Bad(what, "backoff_factor", "in (0, 1)", options.backoff_factor);
  }
  if (options.growth_interval < 1) {
    return Bad(what, "growth_interval", ">= 1", static_cast<double>(options.growth_interval));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateGradScalerOptions(const GradScalerOptions& options) { return Validate(options, "GradScaler", "init_scale"); }

Result<GradScaler> GradScaler::Create(const GradScalerOptions& options, Communicator* comm,
                                     std::optional<at::Device> collective_device) {
  CTRUN_RETURN_IF_ERROR(ValidateGradScalerOptions(options));
  return GradScaler(options, comm, collective_device);
}

GradScaler::GradScaler(const GradScalerOptions& options, Communicator* comm,
                       std::optional<at::Device> collective_device)
    : options_(options), comm_(comm), collective_device_(collective_device),
      scale_(static_cast<float>(options.init_scale)) {}

at::Tensor GradScaler::Scale(const at::Tensor& loss) const {
  at::ScalarType type = at::promote_types(loss.scalar_type(), at::kFloat);
  return loss.to(type).mul(static_cast<double>(scale_));
}

Result<bool> GradScaler::AgreeFoundInf(at::Tensor flag) {
  if (comm_ != nullptr) {
    if (collective_device_.has_value()) flag = flag.to(*collective_device_);
    CTRUN_RETURN_IF_ERROR(WaitWork(comm_->AllReduceSum(flag), "the loss scaler's inf/NaN all-reduce"));
  }
  return flag.item<float>() > 0;
}

Status GradScaler::Unscale(torch::optim::Optimizer& optimizer) {
  auto it = per_optimizer_.find(&optimizer);
  if (it != per_optimizer_.end()) {
    return Status::FailedPrecondition(
        it->second.stage == Stage::kStepped
            ? "GradScaler: Unscale() called after Step() for this optimizer; call Update() first"
            : "GradScaler: Unscale() already called for this optimizer since the last Update()");
  }
  Result<std::vector<at::Tensor>> grads = Gradients(optimizer);
  if (!grads.ok()) return grads.status();

  at::Tensor flag;
  {
    at::NoGradGuard no_grad;
    at::Device device = grads->empty() ? at::Device(at::kCPU) : grads->front().device();
    flag = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
    // Checked before the division, as PyTorch's kernel does.
    for (const at::Tensor& grad : *grads) flag.add_(grad.isfinite().all().logical_not().to(device));
    flag.clamp_max_(1);
    // PyTorch's inverse: the float64 reciprocal rounded to float32.
    double inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
    for (const at::Tensor& grad : *grads) grad.mul_(inv_scale);
  }
  Result<bool> found = AgreeFoundInf(flag);
  if (!found.ok()) return found.status();
  per_optimizer_[&optimizer] = PerOptimizer{Stage::kUnscaled, *found};
  found_inf_ = found_inf_ || *found;
  return Status::Ok();
}

Result<bool> GradScaler::Step(torch::optim::Optimizer& optimizer) {
  auto it = per_optimizer_.find(&optimizer);
  if (it != per_optimizer_.end() && it->second.stage == Stage::kStepped) {
    return Status::FailedPrecondition("GradScaler: Step() already called for this optimizer since the last Update()");
  }
  if (it == per_optimizer_.end()) {
    CTRUN_RETURN_IF_ERROR(Unscale(optimizer));
    it = per_optimizer_.find(&optimizer);
  }
  it->second.stage = Stage::kStepped;
  if (it->second.found_inf) {
    ++skipped_steps_;
    return false;
  }
  optimizer.step();
  return true;
}

Status GradScaler::Update() {
  if (per_optimizer_.empty()) {
    return Status::FailedPrecondition("GradScaler: Update() called with no Unscale() or Step() since the last Update()");
  }
  if (found_inf_) {
    scale_ = static_cast<float>(scale_ * options_.backoff_factor);
    growth_tracker_ = 0;
  } else if (growth_tracker_ + 1 == options_.growth_interval) {
    float grown = static_cast<float>(scale_ * options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  } else {
    ++growth_tracker_;
  }
  per_optimizer_.clear();
  found_inf_ = false;
  return Status::Ok();
}

GradScalerState GradScaler::ToState() const {
  auto f64 = [](double value) { return at::tensor(value, at::kDouble); };
  auto i64 = [](int64_t value) { return at::tensor(value, at::kLong); };
  return {{"scale", f64(scale_)},
          {"growth_factor", f64(options_.growth_factor)},
          {"backoff_factor", f64(options_.backoff_factor)},
          {"growth_interval", i64(options_.growth_interval)},
          {"_growth_tracker", i64(growth_tracker_)}};
}

Status GradScaler::FromState(const GradScalerState& state) {
  Result<double> scale = Element(state, "scale");
  Result<double> growth = Element(state, "growth_factor");
  Result<double> backoff = Element(state, "backoff_factor");
  Result<int64_t> interval = Integer(state, "growth_interval");
  Result<int64_t> tracker = Integer(state, "_growth_tracker");
  for (const Status* status : {&scale.status(), &growth.status(), &backoff.status(), &interval.status(),
                               &tracker.status()}) {
    if (!status->ok()) return *status;
  }
  GradScalerOptions options{*scale, *growth, *backoff, *interval};
  // The saved scale is the new initial scale, as in PyTorch's load_state_dict.
  CTRUN_RETURN_IF_ERROR(Validate(options, "GradScaler state", "scale"));
  if (*tracker < 0 || *tracker >= *interval) {
    return Bad("GradScaler state", "_growth_tracker", "in [0, growth_interval)", static_cast<double>(*tracker));
  }
  options_ = options;
  scale_ = static_cast<float>(*scale);
  growth_tracker_ = *tracker;
  return Status::Ok();
}

}  // namespace ctrun::trainer
