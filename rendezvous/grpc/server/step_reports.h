// StepReports: the keep-alives' step reports of each run, through the run's
// StragglerDetector (rendezvous/machine/straggler.h): which ranks are
// stragglers, the changes queued for each node (they go back in its
// keep-alive's reply), and the step times `ctrun status` and the metrics
// show. A run's detector goes when the run is forgotten.
//
// Locking: none of its own; the server's mutex guards it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "rendezvous.pb.h"
#include "rendezvous/machine/run_view.h"
#include "rendezvous/machine/straggler.h"

namespace ctrun::rdzv {

class StepReports {
 public:
  // Feeds the step report of `request` (if any) from `node` to the run's
  // detector, adds a line to `logs` for each flag or recovery, and puts the
  // changes queued for `node` into `reply`. Returns the changes (for the
  // metrics).
  std::vector<StragglerChange> Report(const std::string& run_id, const NodeId& node,
                                      const v1::KeepAliveRequest& request, v1::KeepAliveReply* reply,
                                      std::vector<std::string>& logs);

  // The run's ranks' step times (empty when none reported).
  std::vector<RankStepView> Ranks(const std::string& run_id) const;
  // Adds the run's step times, if any, to `view` (AddStepTimes).
  void AddTo(const std::string& run_id, RunView& view) const;
  // The run is forgotten: so is its detector.
  void Forget(const std::string& run_id) { detectors_.erase(run_id); }

 private:
  std::map<std::string, StragglerDetector> detectors_;  // by run id
};

}  // namespace ctrun::rdzv
