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
//  - Interleaved 1F1B (Narayanan et al. 2021, sec. 2.2; Megatron-LM's
//    forward_backward_pipelining_with_interleaving): the model's layers are
//    cut into p*v chunks ("virtual stages") and stage s holds the v chunks
//    s, s+p, ..., s+(v-1)p; PipeAction::chunk c on stage s is virtual stage
//    c*p + s. Stage s runs the m*v (micro-batch, chunk) passes in Megatron's
//    order: the k-th forward is chunk (k/p)%v of micro-batch (k/(p*v))*p +
//    k%p, the k-th backward the same with chunk v-1-(k/p)%v; warm-up is
//    (p-s-1)*2 + (v-1)*p forwards capped at m*v (all of them when m == p),
//    then one forward and one backward alternate, then the rest of the
//    backwards. With v >= 2 it needs m to be a multiple of p. With v == 1 it
//    is exactly 1F1B (Megatron runs its non-interleaved schedule then too).
// GPipe and 1F1B have the same bubble: (p-1)/(m+p-1) of a step when forward
// and backward take the same time on every stage; interleaving divides the
// bubble's time by v (see BubbleFraction).
//
// Pure functions of integers; no torch, no I/O; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

enum class PipeSchedule { k1F1B, kGPipe, kInterleaved };

// "1f1b", "gpipe" or "interleaved". InvalidArgument naming --pp-schedule
// otherwise.
Result<PipeSchedule> ParsePipeSchedule(const std::string& name);
const char* PipeScheduleName(PipeSchedule schedule);

// Whether `schedule` can run `micro_batches` on `stages` with
// `virtual_stages` model chunks per stage; one plain-English line naming the
// flags (--pp-schedule, --micro-batches, --pp-virtual-stages) otherwise.
// Interleaved with v >= 2 needs micro_batches a multiple of stages (v == 1
// is plain 1F1B and needs nothing); the others need virtual_stages == 1. Requires stages >= 1, micro_batches >= 1.
Status CheckPipeSchedule(PipeSchedule schedule, int stages, int micro_batches, int virtual_stages);

struct PipeAction {
  enum class Kind { kForward, kBackward };
  Kind kind;
  int micro_batch;
  int chunk = 0;  // which of the stage's model chunks (0..v-1); 0 unless interleaved
  bool operator==(const PipeAction&) const = default;
};

// The actions of `stage` (0-based) of `stages` for `micro_batches`, in order,
// each stage holding `virtual_stages` model chunks (only interleaved uses
// more than 1). Requires 0 <= stage < stages, micro_batches >= 1 and
// CheckPipeSchedule(...) OK.
std::vector<PipeAction> StageSchedule(PipeSchedule schedule, int stages, int stage, int micro_batches,
                                      int virtual_stages = 1);

// "F0 F1 B0 F2 B1 B2": a schedule as text, for logs and tests. When any
// action has a chunk > 0 (an interleaved schedule with v >= 2) every action
// shows "micro_batch.chunk": "F0.0 F1.0 F0.1 ...".
std::string ScheduleText(const std::vector<PipeAction>& actions);

// The most (micro-batch, chunk) pairs whose activations a stage holds at
// once; micro-batches when the schedule has one chunk per stage. A chunk
// holds 1/v of the stage's layers, so a pair weighs 1/v of a micro-batch.
int PeakInFlight(const std::vector<PipeAction>& actions);

// The idle share of a step with equal forward+backward time per micro-batch
// on every stage: (p-1)/(v*m + p-1). With v == 1 that is GPipe's and 1F1B's
// (p-1)/(m+p-1). For interleaving, the paper's "bubble time fraction"
// (1/v)(p-1)/m is the bubble over the ideal compute time m; this is the
// same bubble over the whole step, (p-1)/v of idle in m + (p-1)/v.
double BubbleFraction(int stages, int micro_batches, int virtual_stages = 1);

}  // namespace ctrun::trainer
