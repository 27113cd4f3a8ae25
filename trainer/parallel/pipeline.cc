#include "trainer/parallel/pipeline.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "trainer/parallel/memory_meter.h"
#include "trainer/comm/torch_error.h"

namespace ctrun::trainer {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Tags: a micro-batch's activation and its gradient each have their own.
int ActivationTag(int micro) { return 2 * micro; }
int GradientTag(int micro) { return 2 * micro + 1; }

}  // namespace

Pipeline::Pipeline(PipelineStage* stage, Communicator* pp, DistributedDataParallel* ddp, PipeSchedule schedule,
                   int micro_batches)
    : stage_(stage), pp_(pp), ddp_(ddp), schedule_(schedule), micro_batches_(micro_batches) {}

Result<PipelineStepStats> Pipeline::Step(const at::Tensor& tokens, const at::Tensor& targets) {
  const int stages = pp_ ? pp_->size() : 1;
  const int stage = pp_ ? pp_->rank() : 0;
  const std::vector<PipeAction> actions = StageSchedule(schedule_, stages, stage, micro_batches_);
  std::vector<at::Tensor> token_parts = tokens.chunk(micro_batches_, 0);
  std::vector<at::Tensor> target_parts = targets.chunk(micro_batches_, 0);
  const int64_t micro_rows = tokens.size(0) / micro_batches_;

  PipelineStepStats stats;
  stats.order = ScheduleText(actions);
  std::vector<at::Tensor> inputs(micro_batches_), outputs(micro_batches_);
  // The send in flight each way, with the tensor it reads. Posting the next
  // send one way waits for the one before it: at most two messages per
  // direction are alive, whatever the micro-batch count. The neighbour posts
  // the matching receive without waiting on anything this stage does later
  // (its receives are in micro-batch order), so the wait cannot deadlock.
  using InFlight = std::pair<c10::intrusive_ptr<c10d::Work>, at::Tensor>;
  std::optional<InFlight> activation_sent, gradient_sent;
  auto post = [](std::optional<InFlight>& slot, c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor) {
    std::optional<InFlight> previous = std::exchange(slot, InFlight{std::move(work), std::move(tensor)});
    if (previous) previous->first->wait();
  };
  int held = 0, backwards_left = micro_batches_;
  const double start = Now();
  const int64_t bytes_at_start = TensorMemoryMeter::CurrentBytes();
  TensorMemoryMeter::ResetPeak();
  try {
    for (const PipeAction& action : actions) {
      const int i = action.micro_batch;
      if (action.kind == PipeAction::Kind::kForward) {
        at::Tensor input;
        if (stage_->first()) {
          input = token_parts[static_cast<size_t>(i)];
        } else {
          input = at::empty(stage_->InputShape(micro_rows), at::kFloat);
          pp_->Recv(input, stage - 1, ActivationTag(i))->wait();
          input.requires_grad_(true);
        }
        const double t0 = Now();
        at::Tensor output = stage_->StageForward(input);
        if (stage_->last()) output = stage_->StageLoss(output, target_parts[static_cast<size_t>(i)]) / micro_batches_;
        stats.compute_seconds += Now() - t0;
        if (!stage_->last()) {
          at::Tensor sent = output.detach();
          post(activation_sent, pp_->Send(sent, stage + 1, ActivationTag(i)), sent);
        } else {
          stats.loss += output.item<double>();
        }
        inputs[static_cast<size_t>(i)] = input;
        outputs[static_cast<size_t>(i)] = output;
        stats.peak_in_flight = std::max(stats.peak_in_flight, ++held);
      } else {
        at::Tensor grad;
        if (!stage_->last()) {
          grad = at::empty(outputs[static_cast<size_t>(i)].sizes(), at::kFloat);
          pp_->Recv(grad, stage + 1, GradientTag(i))->wait();
        }
        const double t0 = Now();
        {
          // Only the step's last backward synchronises the dp replicas.
          std::optional<DistributedDataParallel::NoSync> no_sync;
          if (ddp_ != nullptr && --backwards_left > 0) no_sync.emplace(*ddp_);
          if (stage_->last()) {
            outputs[static_cast<size_t>(i)].backward();
          } else {
            torch::autograd::backward({outputs[static_cast<size_t>(i)]}, {grad});
          }
        }
        stats.compute_seconds += Now() - t0;
        if (!stage_->first()) {
          at::Tensor sent = inputs[static_cast<size_t>(i)].grad();
          post(gradient_sent, pp_->Send(sent, stage - 1, GradientTag(i)), sent);
        }
        inputs[static_cast<size_t>(i)] = at::Tensor();
        outputs[static_cast<size_t>(i)] = at::Tensor();
        --held;
      }
    }
    if (activation_sent) activation_sent->first->wait();
    if (gradient_sent) gradient_sent->first->wait();
  } catch (const std::exception& error) {
    return Status::Unavailable("pipeline stage " + std::to_string(stage) +
                               " failed (a peer stage exited, a collective timed out, or the computation threw): " +
                               TorchErrorLine(error));
  }
  if (ddp_ != nullptr) CTRUN_RETURN_IF_ERROR(ddp_->FinishGradSync());
  stats.step_seconds = Now() - start;
  stats.peak_step_bytes = TensorMemoryMeter::PeakBytes() - bytes_at_start;
  return stats;
}

}  // namespace ctrun::trainer
