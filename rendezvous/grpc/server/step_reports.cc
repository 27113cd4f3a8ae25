#include "rendezvous/grpc/server/step_reports.h"

#include <spdlog/fmt/fmt.h>

#include <chrono>

#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv {
namespace {

double Secs(Duration d) { return std::chrono::duration<double>(d).count(); }

std::string Describe(const std::string& run_id, const StragglerChange& c) {
  if (!c.slow) {
    return fmt::format("rendezvous run '{}': rank {} (node {}, local rank {}) is no longer a straggler: step {:.3f} s, "
                       "job median {:.3f} s",
                       run_id, c.rank, ToString(c.node), c.local_rank, Secs(c.step), Secs(c.job_median));
  }
  return fmt::format("rendezvous run '{}': rank {} (node {}, local rank {}) is a straggler: step {:.3f} s, over {:g} x "
                     "the job median {:.3f} s for {} reports in a row",
                     run_id, c.rank, ToString(c.node), c.local_rank, Secs(c.step), c.params.factor,
                     Secs(c.job_median), c.params.intervals);
}

}  // namespace

std::vector<StragglerChange> StepReports::Report(const std::string& run_id, const NodeId& node,
                                                 const v1::KeepAliveRequest& request, v1::KeepAliveReply* reply,
                                                 std::vector<std::string>& logs) {
  if (!request.has_steps()) return {};
  StragglerDetector& detector = detectors_[run_id];
  std::vector<StragglerChange> changes = detector.Report(node, StepReportFromProto(request.steps()));
  for (const StragglerChange& c : changes) logs.push_back(Describe(run_id, c));
  for (const StragglerChange& c : detector.TakeChanges(node)) StragglerChangeToProto(c, reply->add_stragglers());
  return changes;
}

std::vector<RankStepView> StepReports::Ranks(const std::string& run_id) const {
  auto it = detectors_.find(run_id);
  return it == detectors_.end() ? std::vector<RankStepView>{} : it->second.Ranks();
}

void StepReports::AddTo(const std::string& run_id, RunView& view) const {
  if (auto it = detectors_.find(run_id); it != detectors_.end()) AddStepTimes(it->second, view);
}

}  // namespace ctrun::rdzv
