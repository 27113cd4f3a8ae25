// What ctrun-gpt's --precision fp16 and --cpu-offload change in a training
// step, kept out of gpt_main.cc.
//
// fp16 (PyTorch's AMP recipe, the simplest correct design): the model's
// parameters stay float32 (they are the master weights the optimizer
// steps) and the forward runs under autocast, which casts each matmul's
// inputs to float16 and keeps reductions (layer norm, softmax, the loss) in
// float32; parameter gradients come back float32 through autocast's casts.
// Each stage's output is cast back to float32, so pipeline messages keep
// their float32 receive buffers. The last stage's loss is multiplied by the
// GradScaler's scale before backward (gradients flowing back in float16
// then underflow less); before the optimizer step the scaler unscales the
// gradients, agrees an inf/NaN verdict over the whole world (one
// all-reduce), skips the step on every rank alike when one rank saw one,
// and grows or backs off the scale (grad_scaler.h). DDP, tensor-parallel
// sums and FSDP's reductions are linear, so they carry the scaled gradients
// unchanged. The scaler's state is saved beside each mesh checkpoint
// (checkpoint/scaler_state.h).
//
// --cpu-offload (FSDP only, parallel/cpu_offload.h): params is FSDP's own
// option (FsdpOptions::offload_params); optimizer gives the optimizer host
// copies of the shards (OptimizerOffload), pulled before and pushed after
// each step here.
//
// fp32 without offload changes nothing: no scaler, no collective, the same
// tensors and the same optimizer.step() as before.
//
// Ownership: the world communicator is borrowed and must outlive this
// object; so must the chunks given to Stages(). One thread (the training
// loop); Step() issues a collective in fp16 and must run on every rank.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/DispatchKey.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "trainer/apps/gpt_flags.h"
#include "trainer/comm/communicator.h"
#include "trainer/parallel/cpu_offload.h"
#include "trainer/parallel/fsdp.h"
#include "trainer/parallel/grad_scaler.h"
#include "trainer/parallel/pipeline_stage.h"

namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

// Autocast on `device_type` (CUDA: float16, CPU: bfloat16, torch's default
// dtypes) while alive, with its weight-cast cache off (FSDP swaps the
// parameters' storage between units); the previous state is put back at
// destruction. Does nothing when `enabled` is false.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  c10::DispatchKey key_ = c10::DispatchKey::AutocastCPU;
  bool was_excluded_ = true, cache_was_enabled_ = true;
};

// A pipeline stage run under autocast: Forward's floating output is cast
// back to float32; Loss is the inner loss times the scaler's scale (the
// scaler is borrowed; null: unscaled).
class AutocastStage : public PipelineStage {
 public:
  AutocastStage(PipelineStage& inner, c10::DeviceType device_type, const GradScaler* scaler)
      : inner_(inner), device_type_(device_type), scaler_(scaler) {}
  at::Tensor Forward(const at::Tensor& input) override;
  at::Tensor Loss(const at::Tensor& output, const at::Tensor& targets) const override;
  std::vector<int64_t> ActivationShape(int64_t batch) const override { return inner_.ActivationShape(batch); }
  bool first() const override { return inner_.first(); }
  bool last() const override { return inner_.last(); }

 private:
  PipelineStage& inner_;
  c10::DeviceType device_type_;
  const GradScaler* scaler_;
};

struct GptPrecisionOptions {
  bool fp16 = false;
  CpuOffload offload = CpuOffload::kNone;
  at::Device device{at::kCPU};    // where the model computes
  Communicator* world = nullptr;  // every rank (null: one process)
};

class GptPrecision {
 public:
  // InvalidArgument when the scaler's options are bad (not with defaults).
  static Result<std::unique_ptr<GptPrecision>> Create(const GptPrecisionOptions& options);

  // The tensors to give the optimizer in place of `params`: host copies
  // under --cpu-offload optimizer, else `params`. Call once.
  std::vector<at::Tensor> OptimizerParams(std::vector<at::Tensor> params);
  // The stages (model chunks) the pipeline runs: `chunks` themselves, or
  // under fp16 an AutocastStage over each (owned here).
  std::vector<PipelineStage*> Stages(std::vector<PipelineStage*> chunks);
  // fsdp.Forward(tokens), under autocast in fp16 (output float32).
  Result<at::Tensor> FsdpForward(FullyShardedDataParallel& fsdp, const at::Tensor& tokens);
  // loss * scale in fp16 (what backward starts from), else `loss`.
  at::Tensor ScaleLoss(const at::Tensor& loss) const;
  // A loss value computed from ScaleLoss's output, divided back.
  double UnscaleLoss(double loss) const;

  // The optimizer step after backward: gradients pulled to the host copies
  // (offload optimizer), the scaler's unscale/inf check/skip and update
  // (fp16), the step, values pushed back to the device. Unavailable when the
  // scaler's all-reduce fails.
  Status Step(torch::optim::Optimizer& optimizer);

  // Optimizer steps skipped for inf/NaN (0 without fp16).
  int64_t skipped_steps() const { return scaler_ ? scaler_->skipped_steps() : 0; }
  const GradScaler* scaler() const { return scaler_ ? &*scaler_ : nullptr; }

  // fp16 only (else OK, nothing written): world rank 0 writes the scaler's
  // state for checkpoint step `step` in `dir` (scaler_state.h); call before
  // the step's mesh checkpoint.
  Status Save(const std::string& dir, int64_t step, int rank) const;
  // fp16 only: every rank loads it after the mesh checkpoint of `step` was
  // loaded. A checkpoint without one (saved in fp32) leaves the scaler at
  // its initial state, with a line from rank 0. InvalidArgument for a
  // corrupt file.
  Status Load(const std::string& dir, int64_t step, int rank);

 private:
  explicit GptPrecision(const GptPrecisionOptions& options) : options_(options) {}

  GptPrecisionOptions options_;
  std::optional<GradScaler> scaler_;
  std::unique_ptr<OptimizerOffload> offload_;
  std::vector<std::unique_ptr<AutocastStage>> stages_;
};

// GptPrecision for ctrun-gpt's --precision and --cpu-offload (checked by
// CheckPrecisionFlags), on `device`, agreeing over `world`.
Result<std::unique_ptr<GptPrecision>> MakeGptPrecision(const GptFlags& flags, at::Device device,
                                                       Communicator* world);

}  // namespace ctrun::trainer
