#include "trainer/parallel/pipeline_schedule.h"

#include <algorithm>
#include <cassert>

namespace ctrun::trainer {

namespace {

using K = PipeAction::Kind;

// GPipe (warm-up m) and 1F1B (warm-up min(p-1-s, m)).
std::vector<PipeAction> OneChunkSchedule(PipeSchedule schedule, int stages, int stage, int micro_batches) {
  std::vector<PipeAction> actions;
  const int m = micro_batches;
  const int warmup = schedule == PipeSchedule::kGPipe ? m : std::min(stages - 1 - stage, m);
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) actions.push_back({K::kForward, next_forward});
  while (next_forward < m) {
    actions.push_back({K::kForward, next_forward++});
    actions.push_back({K::kBackward, next_backward++});
  }
  while (next_backward < m) actions.push_back({K::kBackward, next_backward++});
  return actions;
}

// The k-th forward or backward of a stage in Megatron's interleaved order:
// groups of p consecutive passes share a chunk; chunks cycle 0..v-1 for
// forwards and v-1..0 for backwards; each full cycle of p*v passes moves on
// to the next p micro-batches.
PipeAction InterleavedPass(K kind, int k, int stages, int virtual_stages) {
  const int p = stages, v = virtual_stages;
  const int micro_batch = (k / (p * v)) * p + k % p;
  const int group = (k % (p * v)) / p;
  return {kind, micro_batch, kind == K::kForward ? group : v - 1 - group};
}

std::vector<PipeAction> InterleavedSchedule(int stages, int stage, int micro_batches, int virtual_stages) {
  const int p = stages, v = virtual_stages;
  const int total = micro_batches * v;
  // Megatron: when m == p every forward runs first; otherwise 2 per later
  // stage (its forward and backward exchanges are paired) plus a full round
  // of the first v-1 chunks.
  const int warmup = micro_batches == p ? total : std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  std::vector<PipeAction> actions;
  actions.reserve(2 * static_cast<size_t>(total));
  for (int k = 0; k < warmup; ++k) actions.push_back(InterleavedPass(K::kForward, k, p, v));
  for (int k = 0; k < total - warmup; ++k) {
    actions.push_back(InterleavedPass(K::kForward, warmup + k, p, v));
    actions.push_back(InterleavedPass(K::kBackward, k, p, v));
  }
  for (int k = total - warmup; k < total; ++k) actions.push_back(InterleavedPass(K::kBackward, k, p, v));
  return actions;
}

// "use 4 or 8" / "use 4": the multiples of `stages` around `micro_batches`.
std::string NearMultiples(int micro_batches, int stages) {
  const int lower = micro_batches / stages * stages;
  const int upper = lower + stages;
  if (lower == 0) return "use " + std::to_string(upper);
  return "use " + std::to_string(lower) + " or " + std::to_string(upper);
}

}  // namespace

Result<PipeSchedule> ParsePipeSchedule(const std::string& name) {
  if (name == "1f1b") return PipeSchedule::k1F1B;
  if (name == "gpipe") return PipeSchedule::kGPipe;
  if (name == "interleaved") return PipeSchedule::kInterleaved;
  return Status::InvalidArgument("--pp-schedule '" + name + "': unknown (use 1f1b, gpipe or interleaved)");
}

const char* PipeScheduleName(PipeSchedule schedule) {
  switch (schedule) {
    case PipeSchedule::k1F1B: return "1f1b";
    case PipeSchedule::kGPipe: return "gpipe";
    case PipeSchedule::kInterleaved: return "interleaved";
  }
  return "unknown";
}

Status CheckPipeSchedule(PipeSchedule schedule, int stages, int micro_batches, int virtual_stages) {
  if (virtual_stages < 1) {
    return Status::InvalidArgument("--pp-virtual-stages " + std::to_string(virtual_stages) +
                                   ": must be at least 1");
  }
  if (schedule != PipeSchedule::kInterleaved) {
    if (virtual_stages == 1) return Status::Ok();
    return Status::InvalidArgument("--pp-virtual-stages " + std::to_string(virtual_stages) +
                                   " needs --pp-schedule interleaved (" + PipeScheduleName(schedule) +
                                   " runs one model chunk per stage)");
  }
  if (virtual_stages > 1 && micro_batches % stages != 0) {
    return Status::InvalidArgument("--micro-batches " + std::to_string(micro_batches) +
                                   " is not a multiple of the pipeline's " + std::to_string(stages) +
                                   " stages, which --pp-schedule interleaved with --pp-virtual-stages " +
                                   std::to_string(virtual_stages) + " needs; " + NearMultiples(micro_batches, stages));
  }
  return Status::Ok();
}

std::vector<PipeAction> StageSchedule(PipeSchedule schedule, int stages, int stage, int micro_batches,
                                      int virtual_stages) {
  assert(CheckPipeSchedule(schedule, stages, micro_batches, virtual_stages).ok());
  if (schedule == PipeSchedule::kInterleaved) {
    if (virtual_stages == 1) return OneChunkSchedule(PipeSchedule::k1F1B, stages, stage, micro_batches);
    return InterleavedSchedule(stages, stage, micro_batches, virtual_stages);
  }
  return OneChunkSchedule(schedule, stages, stage, micro_batches);
}

std::string ScheduleText(const std::vector<PipeAction>& actions) {
  const bool chunked = std::any_of(actions.begin(), actions.end(), [](const PipeAction& a) { return a.chunk > 0; });
  std::string text;
  for (const PipeAction& a : actions) {
    if (!text.empty()) text += ' ';
    text += (a.kind == K::kForward ? 'F' : 'B') + std::to_string(a.micro_batch);
    if (chunked) text += '.' + std::to_string(a.chunk);
  }
  return text;
}

int PeakInFlight(const std::vector<PipeAction>& actions) {
  int held = 0, peak = 0;
  for (const PipeAction& a : actions) {
    held += a.kind == K::kForward ? 1 : -1;
    peak = std::max(peak, held);
  }
  return peak;
}

double BubbleFraction(int stages, int micro_batches, int virtual_stages) {
  return static_cast<double>(stages - 1) /
         static_cast<double>(static_cast<long long>(virtual_stages) * micro_batches + stages - 1);
}

}  // namespace ctrun::trainer
