#include "launcher/liveness/step_times.h"

#include <algorithm>

namespace ctrun::launcher {

StepTimes::StepTimes(int workers, WallTime started) : started_(started), ranks_(std::max(workers, 0)) {}

void StepTimes::Touch(int local_rank, WallTime mtime) {
  if (local_rank < 0 || local_rank >= static_cast<int>(ranks_.size()) || mtime < started_) return;
  Rank& r = ranks_[local_rank];
  if (r.last && mtime <= *r.last) return;
  if (r.last) {
    ++r.steps;
    r.fresh.push_back(std::chrono::duration_cast<Duration>(mtime - *r.last));
    if (r.fresh.size() > kWindow) r.fresh.pop_front();
  }
  r.last = mtime;
}

std::optional<uint64_t> StepTimes::Steps(int local_rank) const {
  if (local_rank < 0 || static_cast<size_t>(local_rank) >= ranks_.size()) return std::nullopt;
  return ranks_[static_cast<size_t>(local_rank)].steps;
}

std::vector<StepSample> StepTimes::Take() {
  std::vector<StepSample> out;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (r.fresh.empty()) continue;
    std::vector<Duration> v(r.fresh.begin(), r.fresh.end());
    const size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + mid, v.end());
    Duration median = v[mid];
    if (v.size() % 2 == 0) {
      const Duration lower = *std::max_element(v.begin(), v.begin() + mid);
      median = lower + (median - lower) / 2;
    }
    out.push_back(StepSample{static_cast<int>(i), median, r.steps});
    r.fresh.clear();
  }
  return out;
}

}  // namespace ctrun::launcher
