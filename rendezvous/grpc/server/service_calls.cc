// RendezvousServer::Impl's RPC handlers (server_impl.h): each maps its
// request to an Event, steps it with StepRun under mu_, and answers after the
// lock is released. Also the end of a Join stream (StreamDone).
#include <spdlog/spdlog.h>

#include <chrono>
#include <string>
#include <utility>

#include "rendezvous/grpc/convert/failure_convert.h"
#include "rendezvous/grpc/convert/ft_convert.h"
#include "rendezvous/grpc/convert/preempt_convert.h"
#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/server_impl.h"
#include "rendezvous/machine/run_view.h"

namespace ctrun::rdzv {
namespace {

constexpr char kShuttingDown[] = "rendezvous server is shutting down: retry against the new server";

Reconnect ReconnectOf(const grpc::ServerContextBase& context) {
  auto it = context.client_metadata().find(kReconnectKey);
  if (it == context.client_metadata().end()) return Reconnect::kNo;
  return ParseReconnect(std::string_view(it->second.data(), it->second.size()));
}

}  // namespace

// A node's current stream that its client dropped means the node is gone
// (agent killed, host lost): the machine hears it as a leave that does not
// close the run, so the others restart now instead of after the keep-alive
// timeout. A node that is in fact alive learns of it from its next
// keep-alive (UNKNOWN_NODE) and joins again. Streams the server ended, or
// that a newer Join replaced, say nothing.
void RendezvousServer::Impl::StreamDone(JoinStream* stream) {
  Outbox out;
  // Every path flushes `out`: ForgetDue may have queued other streams' ends.
  [&] {
    std::lock_guard<CheckedMutex> lock(mu_);
    ForgetDue(Clock::now(), out);
    if (!streams_.Remove(stream)) return;
    if (stream->client_gone() && !stopping_) {
      Result<RendezvousMachine*> machine = registry_.Find(stream->run_id());
      if (machine.ok() && (*machine)->StatusOf(stream->node())) {
        if ((*machine)->StatusOf(stream->node()) == NodeStatus::kMember) {
          failures_.AddLost(stream->run_id(), stream->node(), (*machine)->Tally().round,
                            "its connection to the rendezvous dropped with no exit reported");
        }
        const rdzv::Leave leave{stream->node(), stream->incarnation(), LeaveReason::kSignal};
        out.logs.push_back("rendezvous run '" + stream->run_id() + "': node " + ToString(leave.node) +
                           " dropped its connection; taken as gone");
        StepRun(stream->run_id(), **machine, RunEvent{.event = leave, .now = Clock::now()}, out);
      }
    }
  }();
  out.Flush();
}

void RendezvousServer::Impl::JoinArrived(JoinStream* stream) {
  grpc::ServerContext* context = &stream->context();
  v1::JoinRequest parsed;
  grpc::ByteBuffer bytes(stream->request());  // shares the slices
  const bool well_formed = grpc::SerializationTraits<v1::JoinRequest>::Deserialize(&bytes, &parsed).ok();
  const v1::JoinRequest* request = &parsed;
  stream->Identify(request->run_id(), NodeFromProto(request->node()), request->incarnation(), PeerIp(context->peer()));
  if (!well_formed) {
    stream->FinishNow(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed JoinRequest"));
    return;
  }
  if (grpc::Status bad = call_check_.Check(*context, request->version(), request->token(), request->run_id());
      !bad.ok()) {
    stream->FinishNow(bad);
    return;
  }
  rdzv::Join join = JoinFromProto(*request, PeerIp(context->peer()));
  Outbox out;
  bool stopping = false;
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    stopping = stopping_;
    if (!stopping) ForgetDue(Clock::now(), out);
    const bool resumed = !stopping && Resume(request->run_id(), join, ReconnectOf(*context), stream, out);
    if (!stopping && !resumed) StepJoin(*request, join, stream, out);
  }
  if (stopping) {
    stream->FinishNow(grpc::Status(grpc::StatusCode::UNAVAILABLE, kShuttingDown));
  } else {
    out.Flush();
  }
}

void RendezvousServer::Impl::StepJoin(const v1::JoinRequest& request, const rdzv::Join& join, JoinStream* stream,
                                      Outbox& out) {
  mu_.AssertHeld("StepJoin");
  const Params params = ParamsFromProto(request.params());
  Result<RendezvousMachine*> machine = registry_.FindForJoin(request.run_id(), params);
  if (!machine.ok()) {
    v1::Update update;
    RejectedFromRegistryError(machine.status(), update.mutable_rejected());
    if (stream->Enqueue(std::move(update), true)) out.kicks.push_back(stream);
    out.logs.push_back("rendezvous run '" + request.run_id() + "': refused node " + ToString(join.node) + ": " +
                       machine.status().message());
    return;
  }
  spdlog::debug("rendezvous run '{}': join from {} (addr {})", request.run_id(), ToString(join.node), join.addr);
  const TimePoint now = Clock::now();
  metrics_.OnJoin(request.run_id(), join.node, now);
  const Event event = join;
  StepOutcome outcome = StepRun(request.run_id(), **machine,
                                RunEvent{.event = event, .now = now, .caller = &join.node, .caller_stream = stream},
                                out);
  if (!outcome.caller_rejected) streams_.Install(stream, out);
}

grpc::ServerUnaryReactor* RendezvousServer::Impl::KeepAlive(grpc::CallbackServerContext* context,
                                                            const v1::KeepAliveRequest* request,
                                                            v1::KeepAliveReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  WithUsableRun(request->run_id(), status, [&](RendezvousMachine& machine, TimePoint, Outbox& out) {
    const NodeId node = NodeFromProto(request->node());
    const Event event = rdzv::KeepAlive{node, request->incarnation()};
    StepOutcome outcome = StepRun(request->run_id(), machine,
                                  RunEvent{.event = event,
                                           .now = Clock::now(),
                                           .save = Save::kIfDecided,
                                           .caller = &node,
                                           .own_rejection = OwnRejection::kReturn},
                                  out);
    if (outcome.own_rejection) {
      reply->mutable_rejected()->set_code(RejectCodeToProto(outcome.own_rejection->code));
      reply->mutable_rejected()->set_message(outcome.own_rejection->message);
    } else if (request->has_steps()) {
      metrics_.OnStragglerChanges(request->run_id(),
                                  steps_.Report(request->run_id(), node, *request, reply, out.logs));
    }
  });
  // An unknown run (Usable's NOT_FOUND) is the node's rejection, in the reply.
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    RejectedFromRegistryError(Status::NotFound(status.error_message()), reply->mutable_rejected());
    status = grpc::Status::OK;
  }
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* RendezvousServer::Impl::Leave(grpc::CallbackServerContext* context,
                                                        const v1::LeaveRequest* request, v1::LeaveReply* /*reply*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  Result<LeaveReason> reason = LeaveReasonFromProto(request->reason());
  if (status.ok() && !reason.ok()) status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, reason.status().message());
  std::optional<VerdictSummary> verdict;
  if (status.ok() && request->has_verdict()) {
    Result<VerdictSummary> v = VerdictFromProto(request->verdict());
    if (v.ok()) {
      verdict = std::move(*v);
    } else {
      status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, v.status().message());
    }
  }
  WithUsableRun(request->run_id(), status, [&](RendezvousMachine& machine, TimePoint, Outbox& out) {
    const rdzv::Leave leave{NodeFromProto(request->node()), request->incarnation(), *reason, request->report(),
                            verdict};
    out.logs.push_back("run '" + request->run_id() + "': node " + ToString(leave.node) + " left: " +
                       std::string(Explain(leave.reason)) +
                       (leave.report.empty() ? std::string() : " (" + leave.report + ")"));
    out.debug_logs.push_back("rendezvous run '" + request->run_id() + "': node " + ToString(leave.node) +
                             " left (" + std::string(Name(leave.reason)) + ")");
    if (leave.reason == LeaveReason::kUnhealthy) {
      failures_.AddUnhealthy(request->run_id(), leave.node, machine.Tally().round, leave.report);
    }
    StepRun(request->run_id(), machine, RunEvent{.event = leave, .now = Clock::now()}, out);
  });
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* RendezvousServer::Impl::GetState(grpc::CallbackServerContext* context,
                                                           const v1::StateRequest* request, v1::StateReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  Outbox out;
  if (status.ok()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    const TimePoint now = Clock::now();
    ForgetDue(now, out);
    const std::string run_id = QueryRun(request->run_id(), request->only_run(), status);
    reply->set_run_id(run_id);
    Result<RendezvousMachine*> machine =
        status.ok() ? Usable(run_id, status, RunRegistry::Asker::kQuery) : Result<RendezvousMachine*>(Status::NotFound(""));
    if (std::optional<FtRunView> ft = ft_.View(run_id); ft && !stopping_) {
      FtRunViewToProto(*ft, reply->mutable_ft());
      if (!machine.ok()) {  // only the quorum: each replica group runs its own rendezvous
        reply->set_no_rendezvous_run(true);
        status = grpc::Status::OK;
      }
    }
    if (machine.ok() && request->counts_only()) {
      StateReplyFromCounts((*machine)->Tally(), now, reply);
    } else if (machine.ok()) {
      StateReplyFromSnapshot((*machine)->State(), now, reply);
      RunView view = ViewOf((*machine)->Export(), (*machine)->Tally(), now);
      steps_.AddTo(run_id, view);
      failures_.AddTo(run_id, now, view);
      StateReplyAddView(view, reply);
    }
    if (machine.ok() && (*machine)->Preempted()) {
      PreemptStateToProto(*(*machine)->Preempted(), now, reply->mutable_preempt());
    }
  }
  out.Flush();
  reactor->Finish(status);
  return reactor;
}

Result<RendezvousMachine*> RendezvousServer::Impl::Usable(const std::string& run_id, grpc::Status& status,
                                                          RunRegistry::Asker asker) {
  mu_.AssertHeld("Usable");
  if (stopping_) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kShuttingDown);
    return Status::Unavailable(kShuttingDown);
  }
  Result<RendezvousMachine*> machine = registry_.Find(run_id, asker);
  if (!machine.ok()) status = grpc::Status(grpc::StatusCode::NOT_FOUND, machine.status().message());
  return machine;
}

std::string RendezvousServer::Impl::QueryRun(const std::string& run_id, bool only_run, grpc::Status& status) {
  mu_.AssertHeld("QueryRun");
  if (!only_run || !run_id.empty()) return run_id;
  Result<std::string> only = registry_.OnlyRunId();
  if (!only.ok()) status = grpc::Status(grpc::StatusCode::NOT_FOUND, only.status().message());
  return only.ok() ? *only : run_id;
}

}  // namespace ctrun::rdzv
