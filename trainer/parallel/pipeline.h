// Pipeline: runs one training step of this rank's pipeline stage over the
// pp group: the step's batch cut into micro-batches, forward and backward
// passes in the order of a schedule (pipeline_schedule.h), activations sent
// to the next stage and their gradients back to the previous one
// (point-to-point, asynchronous sends, blocking receives).
//
// A rank may hold several model chunks (interleaved 1F1B): chunk c of
// stage s is virtual stage c*p + s (pipeline_chunks.h); its activations go
// to the next virtual stage, from the last stage's chunk c to stage 0's
// chunk c+1, each (micro-batch, boundary, direction) with its own tag.
//
// The loss of each micro-batch is divided by the number of micro-batches,
// so the accumulated gradients are those of the mean loss over the batch,
// as one process computing the whole batch would get. With a data-parallel
// wrapper (DDP over the dp group, one over all of the rank's chunks), every
// backward but the step's last runs under NoSync and the last one
// synchronises: once per step, whatever the chunk count. With one chunk the
// gradient all-reduce overlaps the last backward; with several, the
// parameters of the chunks that last backward does not reach are
// all-reduced in FinishGradSync, after it.
//
// Lifetimes: the stages (chunks), the pp group and the DDP wrapper must
// outlive the Pipeline. Thread model: one thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

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
  double forward_seconds = 0;  // of that, in forward (the loss included)
  // The calling thread's CPU seconds (thread_cpu_clock.h) in the step and
  // in its forwards: its work, whatever else shares the cores.
  double step_cpu_seconds = 0;
  double forward_cpu_seconds = 0;
  // Most micro-batches whose activations were held; with several chunks,
  // most (micro-batch, chunk) pairs (each 1/v of a stage's activations).
  int peak_in_flight = 0;
  // Most tensor bytes alive during the step beyond those alive at its start
  // (activations, gradients, buffers in flight); 0 unless the
  // TensorMemoryMeter is installed.
  int64_t peak_step_bytes = 0;
  std::string order;           // the actions run, "F0 F1 B0 ..." ("F0.0 F1.0 F0.1 ..." with chunks)
};

class Pipeline {
 public:
  // `stage` not null. `pp` null: one stage. `ddp` null: no data parallelism.
  Pipeline(PipelineStage* stage, Communicator* pp, DistributedDataParallel* ddp, PipeSchedule schedule,
           int micro_batches);
  // This rank's `chunks` (none null; chunks[c] is virtual stage c*p + s,
  // its first() and last() those of the whole model: virtual stage 0 and
  // p*v-1). More than one needs `schedule` interleaved.
  Pipeline(std::vector<PipelineStage*> chunks, Communicator* pp, DistributedDataParallel* ddp,
           PipeSchedule schedule, int micro_batches);

  // One step's forward and backward on `tokens` and `targets` ([B, S] on
  // every stage, B a positive multiple of the micro-batch count; stage 0
  // reads tokens, the last stage targets, the others only B). Leaves the
  // gradients (synchronised over dp) in the stage's parameters' .grad for
  // the optimizer. Returns the stats, or:
  //  - InvalidArgument, before anything is sent or computed, when the
  //    micro-batch count is not positive, the schedule cannot run it with
  //    this many stages and chunks (CheckPipeSchedule), there are several
  //    chunks but fewer than 2 stages, tokens or targets
  //    is undefined or 0-dimensional, their B differ, or B is 0 or not a
  //    multiple of the micro-batch count;
  //  - Unavailable when a send, receive or collective fails (a peer stage
  //    died or timed out) or the computation throws.
  Result<PipelineStepStats> Step(const at::Tensor& tokens, const at::Tensor& targets);

 private:
  Status CheckBatch(const at::Tensor& tokens, const at::Tensor& targets) const;

  std::vector<PipelineStage*> chunks_;
  Communicator* pp_;
  DistributedDataParallel* ddp_;
  PipeSchedule schedule_;
  int micro_batches_;
};

}  // namespace ctrun::trainer
