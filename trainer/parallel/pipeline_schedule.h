// Pipeline schedules: the order in which one pipeline stage runs the forward
// and backward passes of a step's micro-batches.
//
//  - GPipe: every forward (micro-batch 0..m-1), then every backward
//    (m-1..0 would also be valid; we run 0..m-1, the order activations
//    arrive from the next stage). A stage holds all m micro-batches'
//    activations at the peak.
//  - 1F1B (PipeDream-Flush, Megatron's non-interleaved schedule): stage s of
//    p first runs w = min(p-1-s, m) warm-up forwards, then alternates one
//    forward and one backward while forwards remain, then runs the remaining
//    w backwards. A stage holds at most w+1 <= p micro-batches' activations.
// Both have the same bubble: (p-1)/(m+p-1) of a step when forward and
// backward take the same time on every stage.
//
// Pure functions of integers; no torch, no I/O.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

enum class PipeSchedule { k1F1B, kGPipe };

// "1f1b" or "gpipe". InvalidArgument naming --pp-schedule otherwise.
Result<PipeSchedule> ParsePipeSchedule(const std::string& name);
const char* PipeScheduleName(PipeSchedule schedule);

struct PipeAction {
  enum class Kind { kForward, kBackward };
  Kind kind;
  int micro_batch;
  bool operator==(const PipeAction&) const = default;
};

// The actions of `stage` (0-based) of `stages` for `micro_batches`, in order.
// Requires 0 <= stage < stages and micro_batches >= 1.
std::vector<PipeAction> StageSchedule(PipeSchedule schedule, int stages, int stage, int micro_batches);

// "F0 F1 B0 F2 B1 B2": a schedule as text, for logs and tests.
std::string ScheduleText(const std::vector<PipeAction>& actions);

// The most micro-batches whose activations a stage holds at once.
int PeakInFlight(const std::vector<PipeAction>& actions);

// (p-1)/(m+p-1): the idle share of a step with equal forward+backward time
// per micro-batch on every stage.
double BubbleFraction(int stages, int micro_batches);

}  // namespace ctrun::trainer
