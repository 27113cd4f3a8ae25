#include "trainer/parallel/pipeline_schedule.h"

#include <algorithm>

namespace ctrun::trainer {

Result<PipeSchedule> ParsePipeSchedule(const std::string& name) {
  if (name == "1f1b") return PipeSchedule::k1F1B;
  if (name == "gpipe") return PipeSchedule::kGPipe;
  return Status::InvalidArgument("--pp-schedule '" + name + "': unknown (use 1f1b or gpipe)");
}

const char* PipeScheduleName(PipeSchedule schedule) {
  return schedule == PipeSchedule::k1F1B ? "1f1b" : "gpipe";
}

std::vector<PipeAction> StageSchedule(PipeSchedule schedule, int stages, int stage, int micro_batches) {
  using K = PipeAction::Kind;
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

std::string ScheduleText(const std::vector<PipeAction>& actions) {
  std::string text;
  for (const PipeAction& a : actions) {
    if (!text.empty()) text += ' ';
    text += (a.kind == PipeAction::Kind::kForward ? 'F' : 'B') + std::to_string(a.micro_batch);
  }
  return text;
}

int PeakInFlight(const std::vector<PipeAction>& actions) {
  int held = 0, peak = 0;
  for (const PipeAction& a : actions) {
    held += a.kind == PipeAction::Kind::kForward ? 1 : -1;
    peak = std::max(peak, held);
  }
  return peak;
}

double BubbleFraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

}  // namespace ctrun::trainer
