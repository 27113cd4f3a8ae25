#include "trainer/parallel/pipeline.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
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

// The send in flight one way, with the tensor it reads. Posting the next
// send waits for the one before it: at most two messages per direction are
// alive, whatever the micro-batch count. The neighbour posts the matching
// receive without waiting on anything this stage does later (its receives
// are in micro-batch order), so the wait cannot deadlock.
class SendSlot {
 public:
  void Post(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor) {
    std::optional<InFlight> previous = std::exchange(in_flight_, InFlight{std::move(work), std::move(tensor)});
    if (previous) previous->first->wait();
  }
  void Wait() {
    if (in_flight_) in_flight_->first->wait();
  }

 private:
  using InFlight = std::pair<c10::intrusive_ptr<c10d::Work>, at::Tensor>;
  std::optional<InFlight> in_flight_;
};

// One step on this stage: the micro-batches, the activations they hold
// between their forward and backward, the sends in flight and the stats.
// Forward and Backward throw when a send, receive or the computation fails.
class StepRun {
 public:
  StepRun(PipelineStage& stage, Communicator* pp, DistributedDataParallel* ddp, int micro_batches,
          const at::Tensor& tokens, const at::Tensor& targets)
      : stage_(stage), pp_(pp), ddp_(ddp), micro_batches_(micro_batches),
        rank_(pp ? pp->rank() : 0),
        token_parts_(tokens.chunk(micro_batches, 0)),
        target_parts_(targets.chunk(micro_batches, 0)),
        micro_rows_(tokens.size(0) / micro_batches),
        inputs_(static_cast<size_t>(micro_batches)), outputs_(static_cast<size_t>(micro_batches)),
        backwards_left_(micro_batches) {}

  void Forward(int i) {
    const size_t m = static_cast<size_t>(i);
    at::Tensor input;
    if (stage_.first()) {
      input = token_parts_[m];
    } else {
      input = at::empty(stage_.ActivationShape(micro_rows_), token_parts_[m].options().dtype(at::kFloat));
      pp_->Recv(input, rank_ - 1, ActivationTag(i))->wait();
      input.requires_grad_(true);
    }
    const double t0 = Now();
    at::Tensor output = stage_.Forward(input);
    if (stage_.last()) output = stage_.Loss(output, target_parts_[m]) / micro_batches_;
    stats_.compute_seconds += Now() - t0;
    if (!stage_.last()) {
      at::Tensor sent = output.detach();
      activation_sent_.Post(pp_->Send(sent, rank_ + 1, ActivationTag(i)), sent);
    } else {
      stats_.loss += output.item<double>();
    }
    inputs_[m] = input;
    outputs_[m] = output;
    stats_.peak_in_flight = std::max(stats_.peak_in_flight, ++held_);
  }

  void Backward(int i) {
    const size_t m = static_cast<size_t>(i);
    at::Tensor grad;
    if (!stage_.last()) {
      grad = at::empty(outputs_[m].sizes(), outputs_[m].options().dtype(at::kFloat));
      pp_->Recv(grad, rank_ + 1, GradientTag(i))->wait();
    }
    const double t0 = Now();
    {
      // Only the step's last backward synchronises the dp replicas.
      std::optional<DistributedDataParallel::NoSync> no_sync;
      if (ddp_ != nullptr && --backwards_left_ > 0) no_sync.emplace(*ddp_);
      if (stage_.last()) {
        outputs_[m].backward();
      } else {
        torch::autograd::backward({outputs_[m]}, {grad});
      }
    }
    stats_.compute_seconds += Now() - t0;
    if (!stage_.first()) {
      at::Tensor sent = inputs_[m].grad();
      gradient_sent_.Post(pp_->Send(sent, rank_ - 1, GradientTag(i)), sent);
    }
    inputs_[m] = at::Tensor();
    outputs_[m] = at::Tensor();
    --held_;
  }

  void WaitSends() {
    activation_sent_.Wait();
    gradient_sent_.Wait();
  }

  PipelineStepStats& stats() { return stats_; }

 private:
  PipelineStage& stage_;
  Communicator* pp_;
  DistributedDataParallel* ddp_;
  const int micro_batches_;
  const int rank_;  // this stage's index in the pipeline
  const std::vector<at::Tensor> token_parts_, target_parts_;
  const int64_t micro_rows_;
  std::vector<at::Tensor> inputs_, outputs_;  // per micro-batch, forward to backward
  SendSlot activation_sent_, gradient_sent_;
  int held_ = 0;
  int backwards_left_;
  PipelineStepStats stats_;
};

}  // namespace

Pipeline::Pipeline(PipelineStage* stage, Communicator* pp, DistributedDataParallel* ddp, PipeSchedule schedule,
                   int micro_batches)
    : stage_(stage), pp_(pp), ddp_(ddp), schedule_(schedule), micro_batches_(micro_batches) {}

Status Pipeline::CheckBatch(const at::Tensor& tokens, const at::Tensor& targets) const {
  if (micro_batches_ <= 0) {
    return Status::InvalidArgument("pipeline: micro-batch count " + std::to_string(micro_batches_) +
                                   " is not positive");
  }
  if (!tokens.defined() || !targets.defined() || tokens.dim() < 1 || targets.dim() < 1) {
    return Status::InvalidArgument("pipeline: tokens and targets must be tensors of shape [B, S]");
  }
  const int64_t rows = tokens.size(0);
  if (targets.size(0) != rows) {
    return Status::InvalidArgument("pipeline: " + std::to_string(rows) + " token rows but " +
                                   std::to_string(targets.size(0)) + " target rows");
  }
  if (rows == 0 || rows % micro_batches_ != 0) {
    return Status::InvalidArgument("pipeline: batch of " + std::to_string(rows) +
                                   " rows is not a positive multiple of the " +
                                   std::to_string(micro_batches_) + " micro-batches");
  }
  return Status::Ok();
}

Result<PipelineStepStats> Pipeline::Step(const at::Tensor& tokens, const at::Tensor& targets) {
  CTRUN_RETURN_IF_ERROR(CheckBatch(tokens, targets));
  const int stages = pp_ ? pp_->size() : 1;
  const int stage = pp_ ? pp_->rank() : 0;
  const std::vector<PipeAction> actions = StageSchedule(schedule_, stages, stage, micro_batches_);
  StepRun run(*stage_, pp_, ddp_, micro_batches_, tokens, targets);
  run.stats().order = ScheduleText(actions);
  const double start = Now();
  const int64_t bytes_at_start = TensorMemoryMeter::CurrentBytes();
  TensorMemoryMeter::ResetPeak();
  try {
    for (const PipeAction& action : actions) {
      if (action.kind == PipeAction::Kind::kForward) {
        run.Forward(action.micro_batch);
      } else {
        run.Backward(action.micro_batch);
      }
    }
    run.WaitSends();
  } catch (const std::exception& error) {
    return Status::Unavailable("pipeline stage " + std::to_string(stage) +
                               " failed (a peer stage exited, a collective timed out, or the computation threw): " +
                               TorchErrorLine(error));
  }
  if (ddp_ != nullptr) CTRUN_RETURN_IF_ERROR(ddp_->FinishGradSync());
  PipelineStepStats stats = std::move(run.stats());
  stats.step_seconds = Now() - start;
  stats.peak_step_bytes = TensorMemoryMeter::PeakBytes() - bytes_at_start;
  return stats;
}

}  // namespace ctrun::trainer
