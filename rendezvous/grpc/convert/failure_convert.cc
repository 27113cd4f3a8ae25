#include "rendezvous/grpc/convert/failure_convert.h"

#include "rendezvous/grpc/convert/proto_convert.h"

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
  if (f.oom_kills_before >= 0) out->set_oom_kills_before(f.oom_kills_before);
  if (f.oom_kills_after >= 0) out->set_oom_kills_after(f.oom_kills_after);
  if (f.runtime_s >= 0) out->set_runtime_s(f.runtime_s);
  out->set_max_rss_kib(f.max_rss_kib);
  out->set_hung(f.hung);
  out->set_exec_failed(f.exec_failed);
  out->set_bad_launch(f.bad_launch);
  out->set_hang_frame(f.hang_frame);
  out->set_node_lost(f.node_lost);
  out->set_unhealthy(f.unhealthy);
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
  f.oom_kills_before = p.has_oom_kills_before() ? p.oom_kills_before() : -1;
  f.oom_kills_after = p.has_oom_kills_after() ? p.oom_kills_after() : -1;
  f.runtime_s = p.has_runtime_s() ? p.runtime_s() : -1;
  f.max_rss_kib = p.max_rss_kib();
  f.hung = p.hung();
  f.exec_failed = p.exec_failed();
  f.bad_launch = p.bad_launch();
  f.hang_frame = p.hang_frame();
  f.node_lost = p.node_lost();
  f.unhealthy = p.unhealthy();
  return f;
}

std::vector<WorkerFailureInfo> FailuresFromRequest(const v1::ReportFailureRequest& request) {
  std::vector<WorkerFailureInfo> out;
  out.reserve(request.failures_size());
  for (const v1::WorkerFailureReport& p : request.failures()) out.push_back(WorkerFailureFromProto(p));
  return out;
}

void VerdictToProto(const VerdictSummary& v, v1::Verdict* out) {
  out->set_cause_class(std::string(FailureClassName(v.cls)));
  out->set_cause_rank(v.rank.value_or(-1));
  out->set_cause_node(v.node);
  out->set_cause_host(v.host);
  out->set_evidence(v.evidence);
  out->set_line(v.line);
}

Result<VerdictSummary> VerdictFromProto(const v1::Verdict& p) {
  const std::optional<FailureClass> cls = ParseFailureClass(p.cause_class());
  if (!cls) {
    return Status::InvalidArgument("verdict: cause_class '" + p.cause_class().substr(0, 64) +
                                   "' is not a failure class (e.g. segfault, oom_killed, python_exception)");
  }
  VerdictSummary v;
  v.cls = *cls;
  if (p.cause_rank() >= 0) v.rank = p.cause_rank();
  v.node = p.cause_node();
  v.host = p.cause_host();
  v.evidence = p.evidence();
  v.line = p.line();
  if (p.cause_rank() < -1) v.rank = p.cause_rank();  // refused below
  if (Status s = CheckVerdict(v); !s.ok()) return s;
  return v;
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
