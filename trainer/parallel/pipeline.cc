#include "trainer/parallel/pipeline.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/comm/torch_error.h"
#include "trainer/parallel/memory_meter.h"
#include "trainer/parallel/pipeline_chunks.h"
#include "trainer/parallel/thread_cpu_clock.h"

namespace ctrun::trainer {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

// The sends of a step. One chunk: a SendSlot each way (the 1F1B bound
// above). Several chunks: that argument does not hold (the wrap-around makes
// a rank's neighbours wait on each other's later passes), so no send is
// waited on before it is surely received: an activation's send when its
// gradient has come back (the receiver ran its forward), a gradient's at the
// end of the step. Sends never block; the receives alone order the stages.
class Sends {
 public:
  explicit Sends(bool chunked) : chunked_(chunked) {}

  void Activation(int tag, c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor) {
    if (!chunked_) return activation_slot_.Post(std::move(work), std::move(tensor));
    activations_.emplace(tag, InFlight{std::move(work), std::move(tensor)});
  }
  // The gradient of the activation sent with `tag` has arrived.
  void Answered(int tag) {
    auto it = activations_.find(tag);
    if (it == activations_.end()) return;
    it->second.first->wait();
    activations_.erase(it);
  }
  void Gradient(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor) {
    if (!chunked_) return gradient_slot_.Post(std::move(work), std::move(tensor));
    gradients_.emplace_back(std::move(work), std::move(tensor));
  }
  void WaitAll() {
    activation_slot_.Wait();
    gradient_slot_.Wait();
    for (auto& [tag, sent] : activations_) sent.first->wait();
    for (auto& sent : gradients_) sent.first->wait();
  }

 private:
  using InFlight = std::pair<c10::intrusive_ptr<c10d::Work>, at::Tensor>;
  const bool chunked_;
  SendSlot activation_slot_, gradient_slot_;
  std::map<int, InFlight> activations_;  // by tag
  std::vector<InFlight> gradients_;
};

// One step on this rank: the (micro-batch, chunk) passes, the activations
// they hold between their forward and backward, the sends in flight and the
// stats. Forward and Backward throw when a send, receive or the computation
// fails.
class StepRun {
 public:
  StepRun(const std::vector<PipelineStage*>& chunks, Communicator* pp, DistributedDataParallel* ddp,
          int micro_batches, const at::Tensor& tokens, const at::Tensor& targets)
      : chunks_(chunks), pp_(pp), ddp_(ddp), micro_batches_(micro_batches),
        rank_(pp ? pp->rank() : 0), stages_(pp ? pp->size() : 1),
        total_(stages_ * static_cast<int>(chunks.size())),
        token_parts_(tokens.chunk(micro_batches, 0)),
        target_parts_(targets.chunk(micro_batches, 0)),
        micro_rows_(tokens.size(0) / micro_batches),
        inputs_(static_cast<size_t>(micro_batches) * chunks.size()),
        outputs_(static_cast<size_t>(micro_batches) * chunks.size()),
        sends_(chunks.size() > 1),
        backwards_left_(micro_batches * static_cast<int>(chunks.size())) {}

  void Forward(int i, int c) {
    PipelineStage& chunk = *chunks_[static_cast<size_t>(c)];
    const size_t m = Slot(i, c);
    const int here = VirtualStage(stages_, rank_, c);
    at::Tensor input;
    if (chunk.first()) {
      input = token_parts_[static_cast<size_t>(i)];
    } else {
      input = at::empty(chunk.ActivationShape(micro_rows_), token_parts_[0].options().dtype(at::kFloat));
      pp_->Recv(input, RankOf(here - 1), ActivationTag(i, here - 1, total_))->wait();
      input.requires_grad_(true);
    }
    const double t0 = Now(), cpu0 = ThreadCpuSeconds();
    at::Tensor output = chunk.Forward(input);
    if (chunk.last()) output = chunk.Loss(output, target_parts_[static_cast<size_t>(i)]) / micro_batches_;
    const double forward = Now() - t0;
    stats_.forward_cpu_seconds += ThreadCpuSeconds() - cpu0;
    stats_.forward_seconds += forward;
    stats_.compute_seconds += forward;
    if (!chunk.last()) {
      at::Tensor sent = output.detach();
      const int tag = ActivationTag(i, here, total_);
      sends_.Activation(tag, pp_->Send(sent, RankOf(here + 1), tag), sent);
    } else {
      stats_.loss += output.item<double>();
    }
    inputs_[m] = input;
    outputs_[m] = output;
    stats_.peak_in_flight = std::max(stats_.peak_in_flight, ++held_);
  }

  void Backward(int i, int c) {
    PipelineStage& chunk = *chunks_[static_cast<size_t>(c)];
    const size_t m = Slot(i, c);
    const int here = VirtualStage(stages_, rank_, c);
    at::Tensor grad;
    if (!chunk.last()) {
      grad = at::empty(outputs_[m].sizes(), outputs_[m].options().dtype(at::kFloat));
      pp_->Recv(grad, RankOf(here + 1), GradientTag(i, here, total_))->wait();
      sends_.Answered(ActivationTag(i, here, total_));
    }
    const double t0 = Now();
    {
      // Only the step's last backward synchronises the dp replicas.
      std::optional<DistributedDataParallel::NoSync> no_sync;
      if (ddp_ != nullptr && --backwards_left_ > 0) no_sync.emplace(*ddp_);
      if (chunk.last()) {
        outputs_[m].backward();
      } else {
        torch::autograd::backward({outputs_[m]}, {grad});
      }
    }
    stats_.compute_seconds += Now() - t0;
    if (!chunk.first()) {
      at::Tensor sent = inputs_[m].grad();
      sends_.Gradient(pp_->Send(sent, RankOf(here - 1), GradientTag(i, here - 1, total_)), sent);
    }
    inputs_[m] = at::Tensor();
    outputs_[m] = at::Tensor();
    --held_;
  }

  void WaitSends() { sends_.WaitAll(); }

  PipelineStepStats& stats() { return stats_; }

 private:
  size_t Slot(int i, int c) const { return static_cast<size_t>(i) * chunks_.size() + static_cast<size_t>(c); }
  int RankOf(int virtual_stage) const { return ChunkOfVirtualStage(stages_, virtual_stage).stage; }

  const std::vector<PipelineStage*>& chunks_;
  Communicator* pp_;
  DistributedDataParallel* ddp_;
  const int micro_batches_;
  const int rank_;    // this stage's index in the pipeline
  const int stages_;  // p
  const int total_;   // virtual stages, p*v
  const std::vector<at::Tensor> token_parts_, target_parts_;
  const int64_t micro_rows_;
  std::vector<at::Tensor> inputs_, outputs_;  // per (micro-batch, chunk), forward to backward
  Sends sends_;
  int held_ = 0;
  int backwards_left_;
  PipelineStepStats stats_;
};

}  // namespace

Pipeline::Pipeline(PipelineStage* stage, Communicator* pp, DistributedDataParallel* ddp, PipeSchedule schedule,
                   int micro_batches)
    : Pipeline(std::vector<PipelineStage*>{stage}, pp, ddp, schedule, micro_batches) {}

Pipeline::Pipeline(std::vector<PipelineStage*> chunks, Communicator* pp, DistributedDataParallel* ddp,
                   PipeSchedule schedule, int micro_batches)
    : chunks_(std::move(chunks)), pp_(pp), ddp_(ddp), schedule_(schedule), micro_batches_(micro_batches) {}

Status Pipeline::CheckBatch(const at::Tensor& tokens, const at::Tensor& targets) const {
  if (micro_batches_ <= 0) {
    return Status::InvalidArgument("pipeline: micro-batch count " + std::to_string(micro_batches_) +
                                   " is not positive");
  }
  CTRUN_RETURN_IF_ERROR(CheckPipeSchedule(schedule_, pp_ ? pp_->size() : 1, micro_batches_,
                                          static_cast<int>(chunks_.size())));
  if (chunks_.size() > 1 && (pp_ == nullptr || pp_->size() < 2)) {
    return Status::InvalidArgument("pipeline: " + std::to_string(chunks_.size()) +
                                   " model chunks a stage need a pipeline of 2 stages or more");
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
  const std::vector<PipeAction> actions =
      StageSchedule(schedule_, stages, stage, micro_batches_, static_cast<int>(chunks_.size()));
  StepRun run(chunks_, pp_, ddp_, micro_batches_, tokens, targets);
  run.stats().order = ScheduleText(actions);
  const double start = Now(), cpu_start = ThreadCpuSeconds();
  const int64_t bytes_at_start = TensorMemoryMeter::CurrentBytes();
  TensorMemoryMeter::ResetPeak();
  try {
    for (const PipeAction& action : actions) {
      if (action.kind == PipeAction::Kind::kForward) {
        run.Forward(action.micro_batch, action.chunk);
      } else {
        run.Backward(action.micro_batch, action.chunk);
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
  stats.step_cpu_seconds = ThreadCpuSeconds() - cpu_start;
  stats.peak_step_bytes = TensorMemoryMeter::PeakBytes() - bytes_at_start;
  return stats;
}

}  // namespace ctrun::trainer
