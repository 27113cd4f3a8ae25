// RunFailures: what the server keeps of each run's failures for `ctrun
// status --why` (a FailureRecord per run, failure_record.h): the workers a
// node reported failed (ReportFailure), the nodes that left unhealthy, and
// the members lost with no exit reported. Bounded as FailureRecord is; a
// run's record goes when the run is forgotten.
//
// Locking: none of its own; the server's mutex guards it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "rendezvous.pb.h"
#include "rendezvous/machine/failure_record.h"
#include "rendezvous/machine/run_view.h"

namespace ctrun::rdzv {

class RunFailures {
 public:
  // A ReportFailure request's checks beyond token and version: at most
  // kMaxFailuresPerReport failures, a node address of at most
  // kMaxFailureHost bytes, then CheckFailureReport. INVALID_ARGUMENT with
  // one line naming the field; else OK with the request's failures in
  // `failures`.
  static grpc::Status CheckReport(const v1::ReportFailureRequest& request, std::vector<WorkerFailureInfo>& failures);

  // Adds a node's report (checked) to its run; returns the line to log.
  std::string AddReport(const v1::ReportFailureRequest& request, const std::vector<WorkerFailureInfo>& failures,
                        TimePoint now);
  // `node`, a member of round `round`, left unhealthy: `report` is its
  // health check's report (the first line is kept).
  void AddUnhealthy(const std::string& run_id, const NodeId& node, uint64_t round, const std::string& report);
  // `node`, a member of round `round`, went away with no exit reported
  // (`why`): a node_lost record.
  void AddLost(const std::string& run_id, const NodeId& node, uint64_t round, const std::string& why);

  // Adds the run's failures, if any, to `view` (AddFailures).
  void AddTo(const std::string& run_id, TimePoint now, RunView& view) const;
  // The run is forgotten: so is its record.
  void Forget(const std::string& run_id) { records_.erase(run_id); }

 private:
  std::map<std::string, FailureRecord> records_;  // by run id
};

}  // namespace ctrun::rdzv
