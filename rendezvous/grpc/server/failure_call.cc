// RendezvousServer::Impl::ReportFailure (server_impl.h): a node's report of
// its failed workers (`ctrun status --why`). Checked like every call (token,
// version), then its fields (CheckFailureReport: what the server keeps of
// it is bounded), then added to the run's FailureRecord. A closed run the
// server still holds takes reports too: a node may report after the run
// closed, when its workers failed from a peer's end.
#include <vector>

#include "rendezvous/grpc/server/server_impl.h"
#include "rendezvous/machine/failure_record.h"

namespace ctrun::rdzv {

grpc::ServerUnaryReactor* RendezvousServer::Impl::ReportFailure(grpc::CallbackServerContext* context,
                                                                const v1::ReportFailureRequest* request,
                                                                v1::ReportFailureReply* /*reply*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  std::vector<WorkerFailureInfo> failures;
  if (status.ok()) status = RunFailures::CheckReport(*request, failures);
  WithUsableRun(request->run_id(), status, [&](RendezvousMachine&, TimePoint now, Outbox& out) {
    if (!failures.empty()) out.logs.push_back(failures_.AddReport(*request, failures, now));
  });
  reactor->Finish(status);
  return reactor;
}

}  // namespace ctrun::rdzv
