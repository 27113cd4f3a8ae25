#include "trainer/ft/step_pace.h"

#include <algorithm>
#include <vector>

namespace ctrun::trainer::ft {

void StepPace::Record(std::chrono::steady_clock::duration step) {
  steps_.push_back(step);
  if (steps_.size() > kPaceWindow) steps_.pop_front();
}

std::optional<std::chrono::steady_clock::duration> StepPace::Pace() const {
  if (steps_.size() < kMinPaceSteps) return std::nullopt;
  std::vector<std::chrono::steady_clock::duration> sorted(steps_.begin(), steps_.end());
  const auto quartile = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 4);
  std::nth_element(sorted.begin(), quartile, sorted.end());
  return *quartile;
}

std::chrono::milliseconds StepPace::Scaled(int factor, std::chrono::milliseconds floor) const {
  const auto pace = Pace();
  if (!pace) return ceiling_;
  const auto scaled = std::chrono::ceil<std::chrono::milliseconds>(*pace * factor);
  return std::min(ceiling_, std::max(floor, scaled));
}

std::chrono::milliseconds StepPace::Steady() const { return Scaled(2, kMinSteadyStall); }

std::chrono::milliseconds StepPace::Changed() const { return Scaled(4, kMinChangedStall); }

}  // namespace ctrun::trainer::ft
