// StepReporter: the agent's part in straggler detection
// (rendezvous/machine/straggler.h). While an attempt's workers run it owns
// their StepWatch (launcher/liveness/watch.h) and turns the step times into
// the report each keep-alive carries; it turns each flag or recovery of one
// of this node's ranks, sent back by the rendezvous, into a log line and a
// `straggler` / `straggler_recovered` event.
//
// Ownership: borrows `events` (null: no --events-file), which must outlive
// it; owns the watch. Thread model: the agent's io_context thread only.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "launcher/liveness/watch.h"
#include "launcher/logs/event_log.h"
#include "launcher/process/worker_env.h"
#include "rendezvous/machine/straggler.h"

namespace ctrun::launcher {

class StepReporter {
 public:
  StepReporter(EventLog* events, rdzv::StragglerParams params) : events_(events), params_(params) {}

  // The workers of round `round`, with these ranks (by local rank), run:
  // `watch` measures their steps until Stop.
  void Watch(std::unique_ptr<StepWatch> watch, int round, std::vector<WorkerRanks> ranks);
  // Their group is stopping: no more reports.
  void Stop();
  bool watching() const { return watch_ != nullptr; }
  // The steps local rank `local_rank` finished since its group started;
  // nullopt when not watching or not known.
  std::optional<uint64_t> StepsOf(int local_rank) const {
    return watch_ ? watch_->Steps(local_rank) : std::nullopt;
  }

  // The step report for this keep-alive: the ranks that finished a step
  // since the last one; nullopt when not watching.
  std::optional<rdzv::StepReport> Report();
  // A rank of this node was flagged or recovered; `restart_count` goes into
  // its event.
  void OnChange(const rdzv::StragglerChange& change, int restart_count);

 private:
  EventLog* events_;
  rdzv::StragglerParams params_;
  std::unique_ptr<StepWatch> watch_;  // set exactly while watching
  int round_ = 0;
  std::vector<WorkerRanks> ranks_;
};

}  // namespace ctrun::launcher
