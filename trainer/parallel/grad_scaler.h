// GradScaler: dynamic loss scaling for fp16 mixed precision, with the
// semantics of PyTorch's torch.cuda.amp.GradScaler, agreed across ranks.
//
// One step:  Scale(loss).backward();  Step(optimizer);  Update();
// (Unscale(optimizer) may come between backward and Step, e.g. to clip the
// true gradients; Step then does not unscale again.)
//
//  - Scale(loss) returns loss * scale (computed in at least float32, so an
//    fp16 loss does not overflow at the default scale 2^16).
//  - Unscale(optimizer) multiplies every .grad of the optimizer's parameters
//    in place by 1/scale (exact: the scale is a power of two unless the
//    options make it otherwise) and records whether any of them held an inf
//    or a NaN (checked before the division). Once per optimizer per step.
//    With a communicator, this rank's flag (a one-element float32 tensor,
//    0 or 1) is summed over the group with ONE all-reduce, so every rank sees
//    the same verdict and skips the same step (needed when ranks hold
//    different gradients: FSDP/ZeRO shards, tensor/pipeline parallelism).
//  - Step(optimizer) unscales if Unscale was not called, then runs
//    optimizer.step() unless an inf/NaN was found anywhere; a skipped step
//    counts in skipped_steps().
//  - Update() adjusts the scale from this step's verdict (over all optimizers
//    unscaled since the last Update): inf/NaN -> scale *= backoff_factor and
//    the growth tracker resets to 0; otherwise tracker += 1, and when it
//    reaches growth_interval, scale *= growth_factor (kept only if finite in
//    float32) and the tracker resets to 0.
//
// The scale is held in float32 on the host, as PyTorch keeps it in a float32
// tensor. Gradients may be float32, float16 or bfloat16, on any device
// (the inf check uses at::isfinite); sparse gradients are refused.
//
// Constants (PyTorch's defaults): init_scale 2^16 = 65536, growth_factor 2.0,
// backoff_factor 0.5, growth_interval 2000.
//
// The flag is all-reduced where the gradients are, or on `collective_device`
// when given (e.g. cuda:N for NCCL while the gradients live on the host
// under CPU offload).
//
// Ownership: `comm` is borrowed (null = one process) and must outlive this
// object; optimizers are borrowed for each call and identified by address
// until the next Update(). Not thread-safe: call from the training thread,
// and on every rank in the same order (Unscale/Step issue a collective).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/result.h"
#include "base/status.h"
#include "trainer/comm/communicator.h"

namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

struct GradScalerOptions {
  double init_scale = 65536.0;     // > 0 (2^16)
  double growth_factor = 2.0;      // > 1
  double backoff_factor = 0.5;     // in (0, 1)
  int64_t growth_interval = 2000;  // >= 1
};

// The scaler's state as PyTorch's GradScaler.state_dict() names it, each a
// one-element CPU tensor: "scale", "growth_factor", "backoff_factor"
// (float64), "growth_interval", "_growth_tracker" (int64). Storable as
// named tensors in a torch::serialize archive (e.g. under a "scaler/" prefix).
using GradScalerState = std::map<std::string, at::Tensor>;

class GradScaler {
 public:
  // InvalidArgument naming the field when an option is out of range.
  static Result<GradScaler> Create(const GradScalerOptions& options, Communicator* comm,
                                   std::optional<at::Device> collective_device = std::nullopt);

  // loss * scale, in promote(loss dtype, float32); differentiable.
  at::Tensor Scale(const at::Tensor& loss) const;

  // Unscales `optimizer`'s gradients and records the agreed inf/NaN verdict
  // (see above). FailedPrecondition when already called for `optimizer`, or
  // after Step(optimizer), since the last Update(); InvalidArgument for a
  // sparse gradient; Unavailable when the all-reduce fails.
  Status Unscale(torch::optim::Optimizer& optimizer);

  // Steps `optimizer` unless an inf/NaN was found. Returns true when it
  // stepped, false when it skipped. FailedPrecondition when already called
  // for `optimizer` since the last Update(); Unscale's errors.
  Result<bool> Step(torch::optim::Optimizer& optimizer);

  // Adjusts the scale (see above) and starts the next step.
  // FailedPrecondition when no Unscale/Step happened since the last Update().
  Status Update();

  double scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  // Optimizer steps skipped for inf/NaN since construction, or since the
  // count given to RestoreSkippedSteps (not part of ToState: PyTorch's
  // state_dict has no such key; checkpoint/scaler_state.h saves it beside).
  int64_t skipped_steps() const { return skipped_steps_; }
  void RestoreSkippedSteps(int64_t count) { skipped_steps_ = count; }
  const GradScalerOptions& options() const { return options_; }

  GradScalerState ToState() const;
  // Replaces scale, factors, interval and tracker with `state`'s (as
  // PyTorch's load_state_dict does). InvalidArgument naming the key when one
  // is missing or not one element, or a value is out of range (the tracker
  // must lie in [0, growth_interval)); on error nothing changes.
  Status FromState(const GradScalerState& state);

 private:
  enum class Stage { kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kUnscaled;
    bool found_inf = false;  // the group's verdict for this optimizer
  };

  GradScaler(const GradScalerOptions& options, Communicator* comm, std::optional<at::Device> collective_device);
  // Whether `flag` (this rank's 0/1, one float32 element) is non-zero on
  // any rank: one all-reduce with a communicator, none without.
  Result<bool> AgreeFoundInf(at::Tensor flag);

  GradScalerOptions options_;
  Communicator* comm_;
  std::optional<at::Device> collective_device_;
  float scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_steps_ = 0;
  bool found_inf_ = false;  // any optimizer since the last Update()
  std::map<const torch::optim::Optimizer*, PerOptimizer> per_optimizer_;
};

// InvalidArgument naming the first field out of range, else OK.
Status ValidateGradScalerOptions(const GradScalerOptions& options);

}  // namespace ctrun::trainer
