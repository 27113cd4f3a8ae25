// RendezvousServer::Impl::ReportFailure (server_impl.h): a node's report of
// its failed workers (`ctrun status --why`). Checked like every call (token,
// version), then its fields (CheckFailureReport: what the server keeps of
// it is bounded), then added to the run's FailureRecord. A closed run the
// server still holds takes reports too: a node may report after the run
// closed, when its workers failed from a peer's end.
#include <spdlog/fmt/fmt.h>

#include <string>

#include "rendezvous/grpc/convert/failure_convert.h"
#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/server_impl.h"
#include "rendezvous/machine/failure_record.h"

namespace ctrun::rdzv {

grpc::ServerUnaryReactor* RendezvousServer::Impl::ReportFailure(grpc::CallbackServerContext* context,
                                                                const v1::ReportFailureRequest* request,
                                                                v1::ReportFailureReply* /*reply*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  std::vector<WorkerFailureInfo> failures;
  if (status.ok() && static_cast<size_t>(request->failures_size()) > kMaxFailuresPerReport) {
    status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          fmt::format("failure report: failures holds {} workers, more than {}: send the rest in "
                                      "another report",
                                      request->failures_size(), kMaxFailuresPerReport));
  } else if (status.ok() && request->node().addr().size() > kMaxFailureHost) {
    status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          fmt::format("failure report: node.addr is {} bytes, more than {}: send the node's address",
                                      request->node().addr().size(), kMaxFailureHost));
  } else if (status.ok()) {
    failures = FailuresFromRequest(*request);
    if (Status bad = CheckFailureReport(request->host(), failures); !bad.ok()) {
      status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, bad.message());
    }
  }
  Outbox out;
  if (status.ok()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    const TimePoint now = Clock::now();
    ForgetDue(now, out);
    Result<RendezvousMachine*> machine = Usable(request->run_id(), status);
    if (machine.ok() && !failures.empty()) {
      const NodeId node = NodeFromProto(request->node());
      failures_[request->run_id()].Add(node, request->host(), request->round(), failures, now);
      out.logs.push_back(fmt::format("rendezvous run '{}': node {} reported {} failed worker{} (round {})",
                                     request->run_id(), ToString(node), failures.size(),
                                     failures.size() == 1 ? "" : "s", request->round()));
    }
  }
  out.Flush();
  reactor->Finish(status);
  return reactor;
}

}  // namespace ctrun::rdzv
