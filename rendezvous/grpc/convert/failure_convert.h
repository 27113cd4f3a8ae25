// Conversions of failure reports (`ctrun status --why`) between
// proto/rendezvous.proto and the machine's vocabulary (failure_record.h),
// for the server and the client. Kept apart from proto_convert.h (whose
// StateReply conversions call these for StateReply.failures).
//
// Pure functions; thread-safe.
#pragma once

#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "rendezvous.pb.h"
#include "rendezvous/machine/failure_record.h"
#include "rendezvous/machine/verdict_line.h"

namespace ctrun::rdzv {

void WorkerFailureToProto(const WorkerFailureInfo& failure, v1::WorkerFailureReport* out);
WorkerFailureInfo WorkerFailureFromProto(const v1::WorkerFailureReport& failure);

// A ReportFailure request's failures.
std::vector<WorkerFailureInfo> FailuresFromRequest(const v1::ReportFailureRequest& request);

// A verdict (LeaveRequest.verdict, Closed.verdict). FromProto checks it
// (CheckVerdict) and refuses an unknown cause_class, with one line naming
// the field.
void VerdictToProto(const VerdictSummary& verdict, v1::Verdict* out);
Result<VerdictSummary> VerdictFromProto(const v1::Verdict& verdict);

// StateReply.failures.
void ReportedFailureToProto(const ReportedFailure& failure, v1::ReportedFailure* out);
ReportedFailure ReportedFailureFromProto(const v1::ReportedFailure& failure);

}  // namespace ctrun::rdzv
