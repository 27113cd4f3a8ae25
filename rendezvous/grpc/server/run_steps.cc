// RendezvousServer::Impl::ReportSteps: a keep-alive's step report through the
// run's StragglerDetector (rendezvous/machine/straggler.h); the changes queued
// for the sender go back in its reply.
#include <spdlog/fmt/fmt.h>

#include <chrono>

#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/server_impl.h"

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

void RendezvousServer::Impl::ReportSteps(const std::string& run_id, const NodeId& node,
                                         const v1::KeepAliveRequest& request, v1::KeepAliveReply* reply,
                                         Outbox& out) {
  mu_.AssertHeld("ReportSteps");
  if (!request.has_steps()) return;
  StragglerDetector& detector = steps_[run_id];
  const std::vector<StragglerChange> changes = detector.Report(node, StepReportFromProto(request.steps()));
  for (const StragglerChange& c : changes) out.logs.push_back(Describe(run_id, c));
  metrics_.OnStragglerChanges(run_id, changes);
  for (const StragglerChange& c : detector.TakeChanges(node)) StragglerChangeToProto(c, reply->add_stragglers());
}

}  // namespace ctrun::rdzv
