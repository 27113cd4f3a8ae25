// Pipeline: runs one training step of this rank's pipeline stage over the
// pp group: the step's batch cut into micro-batches, forward and backward
// passes in the order of a schedule (pipeline_schedule.h), activations sent
// to the next stage and their gradients back to the previous one
// (point-to-point, asynchronous sends, blocking receives).
//
// The loss of each micro-batch is divided by the number of micro-batches,
// so the accumulated gradients are those of the mean loss over the batch,
// as one process computing the whole batch would get. With a data-parallel
// wrapper (DDP over the dp group), every backward but the step's last runs
// under NoSync and the last one synchronises, so the gradient all-reduce
// overlaps the last backward.
//
// Lifetimes: the stage, the pp group and the DDP wrapper must outlive the
// Pipeline. Thread model: one thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "base/result.h"
#include "trainer/comm/communicator.h"
#include "trainer/parallel/ddp.h"
#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/parallel/pipeline_stage.h"

namespace ctrun::trainer {

struct PipelineStepStats {
  double loss = 0;             // mean over the batch; last stage only
  double step_seconds = 0;     // wall time of the step on this rank
  double compute_seconds = 0;  // of it, in forward and backward compute
  int peak_in_flight = 0;      // most micro-batches whose activations were held
  // Most tensor bytes alive during the step beyond those alive at its start
  // (activations, gradients, buffers in flight); 0 unless the
  // TensorMemoryMeter is installed.
  int64_t peak_step_bytes = 0;
  std::string order;           // the actions run, "F0 F1 B0 ..."
};

class Pipeline {
 public:
  // `stage` not null. `pp` null: one stage. `ddp` null: no data parallelism.
  Pipeline(PipelineStage* stage, Communicator* pp, DistributedDataParallel* ddp, PipeSchedule schedule,
           int micro_batches);

  // One step's forward and backward on `tokens` and `targets` ([B, S] on
  // every stage, B a positive multiple of the micro-batch count; stage 0
  // reads tokens, the last stage targets, the others only B). Leaves the
  // gradients (synchronised over dp) in the stage's parameters' .grad for
  // the optimizer. Returns the stats, or:
  //  - InvalidArgument, before anything is sent or computed, when the
  //    micro-batch count is not positive, tokens or targets is undefined or
  //    0-dimensional, their B differ, or B is 0 or not a multiple of the
  //    micro-batch count;
  //  - Unavailable when a send, receive or collective fails (a peer stage
  //    died or timed out) or the computation throws.
  Result<PipelineStepStats> Step(const at::Tensor& tokens, const at::Tensor& targets);

 private:
  Status CheckBatch(const at::Tensor& tokens, const at::Tensor& targets) const;

  PipelineStage* stage_;
  Communicator* pp_;
  DistributedDataParallel* ddp_;
  PipeSchedule schedule_;
  int micro_batches_;
};

}  // namespace ctrun::trainer
