// RendezvousServer::Impl::Preempt (server_impl.h): a node's preemption
// notice. Checked like every call (token, version), then its fields
// (CheckPreempt: what the server keeps of it is bounded), then stepped on
// the run's machine, whose PreemptNotice decision StepRun pushes on the
// other nodes' Join streams at once.
#include <string>

#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/server_impl.h"
#include "rendezvous/machine/preempt.h"

namespace ctrun::rdzv {

grpc::ServerUnaryReactor* RendezvousServer::Impl::Preempt(grpc::CallbackServerContext* context,
                                                          const v1::PreemptRequest* request,
                                                          v1::PreemptReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  if (Status bad = CheckPreempt(request->remaining_s(), request->source()); status.ok() && !bad.ok()) {
    status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, bad.message());
  }
  WithUsableRun(request->run_id(), status, [&](RendezvousMachine& machine, TimePoint, Outbox& out) {
    const NodeId node = NodeFromProto(request->node());
    const bool first = !machine.Preempted();
    const rdzv::Preempt preempt{node, request->incarnation(), request->remaining_s(), request->source()};
    StepRun(request->run_id(), machine, RunEvent{.event = preempt, .now = Clock::now()}, out);
    reply->set_first(first);
    if (first) {
      const Counts c = machine.Tally();
      const int held = c.participants + c.rejoining + c.redundant + c.members;
      reply->set_pushed(held - (machine.StatusOf(node) ? 1 : 0));
    } else {
      out.logs.push_back("rendezvous run '" + request->run_id() + "': node " + ToString(node) +
                         " sent a preemption notice too (" + request->source() +
                         "); the run was told already (notices: " +
                         std::to_string(machine.Preempted()->notices) + ")");
    }
  });
  reactor->Finish(status);
  return reactor;
}

}  // namespace ctrun::rdzv
