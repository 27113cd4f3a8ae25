#include "rendezvous/grpc/failure_convert.h"

#include "rendezvous/grpc/proto_convert.h"

namespace ctrun::rdzv {

void WorkerFailureToProto(const WorkerFailureInfo& f, v1::WorkerFailureReport* out) {
  out->set_rank(f.rank);
  out->set_local_rank(f.local_rank);
  out->set_exit_code(f.exit_code);
  out->set_signal(f.signal);
  out->set_failed_at_unix_s(f.failed_at_unix_s);
  out->set_error_message(f.error_message);
  out->set_last_line(f.last_line);
  out->set_stacks_file(f.stacks_file);
  out->set_error_file(f.error_file);
  out->set_pid(f.pid);
  out->set_stopped_by_agent(f.stopped_by_agent);
  out->set_from_stderr(f.from_stderr);
}

WorkerFailureInfo WorkerFailureFromProto(const v1::WorkerFailureReport& p) {
  WorkerFailureInfo f;
  f.rank = p.rank();
  f.local_rank = p.local_rank();
  f.exit_code = p.exit_code();
  f.signal = p.signal();
  f.failed_at_unix_s = p.failed_at_unix_s();
  f.error_message = p.error_message();
  f.last_line = p.last_line();
  f.stacks_file = p.stacks_file();
  f.error_file = p.error_file();
  f.pid = p.pid();
  f.stopped_by_agent = p.stopped_by_agent();
  f.from_stderr = p.from_stderr();
  return f;
}

std::vector<WorkerFailureInfo> FailuresFromRequest(const v1::ReportFailureRequest& request) {
  std::vector<WorkerFailureInfo> out;
  out.reserve(request.failures_size());
  for (const v1::WorkerFailureReport& p : request.failures()) out.push_back(WorkerFailureFromProto(p));
  return out;
}

void ReportedFailureToProto(const ReportedFailure& f, v1::ReportedFailure* out) {
  NodeToProto(f.node, out->mutable_node());
  out->set_host(f.host);
  out->set_round(f.round);
  WorkerFailureToProto(f.failure, out->mutable_failure());
  out->set_received_age_s(f.received_age_s);
}

ReportedFailure ReportedFailureFromProto(const v1::ReportedFailure& p) {
  return ReportedFailure{NodeFromProto(p.node()), p.host(), p.round(), WorkerFailureFromProto(p.failure()),
                         p.received_age_s()};
}

}  // namespace ctrun::rdzv
