#include "rendezvous/machine/straggler.h"

#include <algorithm>
#include <chrono>

namespace ctrun::rdzv {

std::optional<Duration> Median(std::vector<Duration>& values) {
  if (values.empty()) return std::nullopt;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const Duration upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const Duration lower = *std::max_element(values.begin(), values.begin() + mid);
  return lower + (upper - lower) / 2;
}

std::vector<StragglerChange> StragglerDetector::Report(const NodeId& node, const StepReport& report) {
  if (report.round < round_) return {};
  if (report.round > round_) {
    // A new round renumbers the ranks: nothing of the old one applies.
    ranks_.clear();
    pending_.clear();
    round_ = report.round;
  }
  params_ = report.params;
  // Every new interval first, so that each is judged against a median that
  // already holds the whole report.
  std::vector<int> fresh;
  for (const RankStep& r : report.ranks) {
    if (r.steps == 0) continue;
    auto [it, inserted] = ranks_.try_emplace(r.rank);
    RankState& s = it->second;
    if (!inserted && s.node == node && s.steps == r.steps) continue;
    s.node = node;
    s.local_rank = r.local_rank;
    s.step = r.step;
    s.steps = r.steps;
    fresh.push_back(r.rank);
  }
  std::vector<StragglerChange> changes;
  const std::optional<Duration> median = JobMedian();
  if (!median) return changes;
  const double median_s = std::chrono::duration<double>(*median).count();
  for (int rank : fresh) {
    RankState& s = ranks_[rank];
    const bool slow =
        params_.factor > 0 && std::chrono::duration<double>(s.step).count() > params_.factor * median_s;
    bool changed = false;
    if (slow) {
      ++s.slow_streak;
      changed = !s.straggler && s.slow_streak >= std::max(params_.intervals, 1);
    } else {
      s.slow_streak = 0;
      changed = s.straggler;
    }
    if (!changed) continue;
    s.straggler = slow;
    StragglerChange c{s.node, rank, s.local_rank, slow, s.step, *median, params_};
    pending_[s.node].push_back(c);
    changes.push_back(std::move(c));
  }
  return changes;
}

std::vector<StragglerChange> StragglerDetector::TakeChanges(const NodeId& node) {
  auto it = pending_.find(node);
  if (it == pending_.end()) return {};
  std::vector<StragglerChange> out = std::move(it->second);
  pending_.erase(it);
  return out;
}

std::optional<Duration> StragglerDetector::JobMedian() const {
  std::vector<Duration> steps;
  steps.reserve(ranks_.size());
  for (const auto& [rank, s] : ranks_) steps.push_back(s.step);
  return Median(steps);
}

std::optional<Duration> StragglerDetector::NodeMedian(const NodeId& node) const {
  std::vector<Duration> steps;
  for (const auto& [rank, s] : ranks_) {
    if (s.node == node) steps.push_back(s.step);
  }
  return Median(steps);
}

std::vector<RankStepView> StragglerDetector::Ranks() const {
  std::vector<RankStepView> out;
  out.reserve(ranks_.size());
  for (const auto& [rank, s] : ranks_) out.push_back(RankStepView{s.node, rank, s.local_rank, s.step, s.straggler});
  return out;
}

}  // namespace ctrun::rdzv
