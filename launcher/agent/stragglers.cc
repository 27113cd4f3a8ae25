#include "launcher/agent/stragglers.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace ctrun::launcher {

void StepReporter::Watch(std::unique_ptr<StepWatch> watch, int round, std::vector<WorkerRanks> ranks) {
  watch_ = std::move(watch);
  round_ = round;
  ranks_ = std::move(ranks);
}

void StepReporter::Stop() { watch_.reset(); }

std::optional<rdzv::StepReport> StepReporter::Report() {
  if (!watch_) return std::nullopt;
  rdzv::StepReport report;
  report.round = static_cast<uint64_t>(round_);
  report.params = params_;
  for (const StepSample& s : watch_->Take()) {
    if (s.local_rank < 0 || s.local_rank >= static_cast<int>(ranks_.size())) continue;
    report.ranks.push_back(rdzv::RankStep{ranks_[s.local_rank].rank, s.local_rank, s.step, s.steps});
  }
  return report;
}

void StepReporter::OnChange(const rdzv::StragglerChange& c, int restart_count) {
  const double step = std::chrono::duration<double>(c.step).count();
  const double median = std::chrono::duration<double>(c.job_median).count();
  if (c.slow) {
    spdlog::warn("rank {} (local rank {}) is a straggler: step {:.3f} s, over {:g} x the job median {:.3f} s for "
                 "{} reports in a row",
                 c.rank, c.local_rank, step, c.params.factor, median, c.params.intervals);
  } else {
    spdlog::info("rank {} (local rank {}) is no longer a straggler: step {:.3f} s, job median {:.3f} s", c.rank,
                 c.local_rank, step, median);
  }
  if (!events_) return;
  nlohmann::ordered_json f{{"rank", c.rank},        {"local_rank", c.local_rank}, {"step_s", step},
                           {"job_median_s", median}, {"factor", c.params.factor},  {"intervals", c.params.intervals},
                           {"restart_count", restart_count}};
  events_->Emit(c.slow ? "straggler" : "straggler_recovered", f);
}

}  // namespace ctrun::launcher
