// Agent's part in straggler detection (rendezvous/machine/straggler.h): the
// step report each keep-alive carries, and the events for this node's ranks
// that the rendezvous flags or clears.
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "launcher/agent/agent.h"

namespace ctrun::launcher {

std::optional<rdzv::StepReport> Agent::StepReportNow() {
  if (!steps_ || state_ != State::kRunning) return std::nullopt;
  rdzv::StepReport report;
  report.round = static_cast<uint64_t>(round_.round);
  report.params = rdzv::StragglerParams{config_.straggler_factor, config_.straggler_intervals};
  for (const StepSample& s : steps_->Take()) {
    if (s.local_rank < 0 || s.local_rank >= static_cast<int>(ranks_.size())) continue;
    report.ranks.push_back(rdzv::RankStep{ranks_[s.local_rank].rank, s.local_rank, s.step, s.steps});
  }
  return report;
}

void Agent::OnStraggler(const rdzv::StragglerChange& c) {
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
                           {"restart_count", restart_count_}};
  events_->Emit(c.slow ? "straggler" : "straggler_recovered", f);
}

}  // namespace ctrun::launcher
