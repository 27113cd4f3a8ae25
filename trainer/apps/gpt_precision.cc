#include "trainer/apps/gpt_precision.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/optim/optimizer.h>

#include <cstdio>

#include "trainer/checkpoint/scaler_state.h"

namespace ctrun::trainer {

AutocastGuard::AutocastGuard(c10::DeviceType device_type, bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
  // Autocast is on for a device while its dispatch key is not excluded:
  // what at::autocast's setters do in every torch version (their names
  // changed in 2.4).
  key_ = device_type == c10::DeviceType::CUDA ? c10::DispatchKey::AutocastCUDA : c10::DispatchKey::AutocastCPU;
  was_excluded_ = c10::impl::tls_is_dispatch_key_excluded(key_);
  cache_was_enabled_ = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  c10::impl::tls_set_dispatch_key_excluded(key_, false);
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  c10::impl::tls_set_dispatch_key_excluded(key_, was_excluded_);
  at::autocast::set_autocast_cache_enabled(cache_was_enabled_);
  at::autocast::clear_cache();
}

at::Tensor AutocastStage::Forward(const at::Tensor& input) {
  at::Tensor output;
  {
    AutocastGuard autocast(device_type_, true);
    output = inner_.Forward(input);
  }
  return output.is_floating_point() ? output.to(at::kFloat) : output;
}

at::Tensor AutocastStage::Loss(const at::Tensor& output, const at::Tensor& targets) const {
  at::Tensor loss = inner_.Loss(output, targets);
  return scaler_ != nullptr ? scaler_->Scale(loss) : loss;
}

Result<std::unique_ptr<GptPrecision>> GptPrecision::Create(const GptPrecisionOptions& options) {
  std::unique_ptr<GptPrecision> out(new GptPrecision(options));
  if (options.fp16) {
    std::optional<at::Device> collective;
    if (options.device.is_cuda()) collective = options.device;
    auto scaler = GradScaler::Create(GradScalerOptions{}, options.world, collective);
    if (!scaler.ok()) return scaler.status();
    out->scaler_.emplace(std::move(*scaler));
  }
  return out;
}

std::vector<at::Tensor> GptPrecision::OptimizerParams(std::vector<at::Tensor> params) {
  if (options_.offload != CpuOffload::kOptimizer) return params;
  offload_ = std::make_unique<OptimizerOffload>(std::move(params));
  return offload_->host_params();
}

std::vector<PipelineStage*> GptPrecision::Stages(std::vector<PipelineStage*> chunks) {
  if (!options_.fp16) return chunks;
  for (PipelineStage*& chunk : chunks) {
    stages_.push_back(std::make_unique<AutocastStage>(*chunk, options_.device.type(), scaler()));
    chunk = stages_.back().get();
  }
  return chunks;
}

Result<at::Tensor> GptPrecision::FsdpForward(FullyShardedDataParallel& fsdp, const at::Tensor& tokens) {
  Result<at::Tensor> output = at::Tensor();
  {
    AutocastGuard autocast(options_.device.type(), options_.fp16);
    output = fsdp.Forward(tokens);
  }
  if (output.ok() && options_.fp16 && output->is_floating_point()) *output = output->to(at::kFloat);
  return output;
}

at::Tensor GptPrecision::ScaleLoss(const at::Tensor& loss) const { return scaler_ ? scaler_->Scale(loss) : loss; }

double GptPrecision::UnscaleLoss(double loss) const { return scaler_ ? loss / scaler_->scale() : loss; }

Status GptPrecision::Step(torch::optim::Optimizer& optimizer) {
  if (offload_) offload_->PullGrads();
  bool stepped = true;
  if (scaler_) {
    Result<bool> result = scaler_->Step(optimizer);
    if (!result.ok()) return result.status();
    stepped = *result;
    CTRUN_RETURN_IF_ERROR(scaler_->Update());
  } else {
    optimizer.step();
  }
  if (offload_ && stepped) offload_->PushParams();
  return Status::Ok();
}

Status GptPrecision::Save(const std::string& dir, int64_t step, int rank) const {
  if (!scaler_ || rank != 0) return Status::Ok();
  return SaveScalerState(*scaler_, ScalerStatePath(dir, step));
}

Status GptPrecision::Load(const std::string& dir, int64_t step, int rank) {
  if (!scaler_) return Status::Ok();
  Result<bool> loaded = LoadScalerState(ScalerStatePath(dir, step), *scaler_);
  if (!loaded.ok()) return loaded.status();
  if (rank == 0) {
    if (*loaded) {
      std::printf("loss scaler: scale %g, %lld steps skipped so far\n", scaler_->scale(),
                  static_cast<long long>(scaler_->skipped_steps()));
    } else {
      std::printf("loss scaler: step %lld's checkpoint has no scaler state (saved in fp32); starting at %g\n",
                  static_cast<long long>(step), scaler_->scale());
    }
    std::fflush(stdout);
  }
  return Status::Ok();
}

Result<std::unique_ptr<GptPrecision>> MakeGptPrecision(const GptFlags& flags, at::Device device,
                                                       Communicator* world) {
  auto offload = ParseCpuOffload(flags.cpu_offload);
  if (!offload.ok()) return offload.status();
  return GptPrecision::Create(
      GptPrecisionOptions{.fp16 = flags.precision == "fp16", .offload = *offload, .device = device, .world = world});
}

}  // namespace ctrun::trainer
