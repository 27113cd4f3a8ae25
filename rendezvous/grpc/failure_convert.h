// Conversions of failure reports (`ctrun status --why`) between
// proto/rendezvous.proto and the machine's vocabulary (failure_record.h),
// for the server and the client. Kept apart from proto_convert.h (whose
// StateReply conversions call these for StateReply.failures).
//
// Pure functions; thread-safe.
#pragma once

#include <vector>

#include "rendezvous.pb.h"
#include "rendezvous/machine/failure_record.h"

namespace ctrun::rdzv {

void WorkerFailureToProto(const WorkerFailureInfo& failure, v1::WorkerFailureReport* out);
WorkerFailureInfo WorkerFailureFromProto(const v1::WorkerFailureReport& failure);

// A ReportFailure request's failures.
std::vector<WorkerFailureInfo> FailuresFromRequest(const v1::ReportFailureRequest& request);

// StateReply.failures.
void ReportedFailureToProto(const ReportedFailure& failure, v1::ReportedFailure* out);
ReportedFailure ReportedFailureFromProto(const v1::ReportedFailure& failure);

}  // namespace ctrun::rdzv
