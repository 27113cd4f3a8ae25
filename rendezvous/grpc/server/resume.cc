// RendezvousServer::Impl::Resume (server_impl.h): a Join that re-opens a
// stream the connection broke (reconnect.h), answered without a new round
// when the node is still a member of the running one.
#include <optional>
#include <utility>

#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/server_impl.h"

namespace ctrun::rdzv {

bool RendezvousServer::Impl::Resume(const std::string& run_id, const rdzv::Join& join, Reconnect mode,
                                    JoinStream* stream, Outbox& out) {
  mu_.AssertHeld("Resume");
  if (mode == Reconnect::kNo) return false;
  Result<RendezvousMachine*> found = registry_.Find(run_id);
  RendezvousMachine* machine = found.ok() ? *found : nullptr;
  if (machine && machine->StatusOf(join.node) == NodeStatus::kMember &&
      ResumeMember(run_id, *machine, join, stream, out)) {
    return true;
  }
  if (mode != Reconnect::kRunning) return false;
  ResumeNonMember(run_id, machine, join, stream, out);
  return true;
}

bool RendezvousServer::Impl::ResumeMember(const std::string& run_id, RendezvousMachine& machine,
                                          const rdzv::Join& join, JoinStream* stream, Outbox& out) {
  mu_.AssertHeld("ResumeMember");
  const Event keep_alive = rdzv::KeepAlive{join.node, join.incarnation};
  StepOutcome outcome = StepRun(run_id, machine,
                                RunEvent{.event = keep_alive,
                                         .now = Clock::now(),
                                         .save = Save::kIfDecided,
                                         .caller = &join.node,
                                         .own_rejection = OwnRejection::kReturnAlone},
                                out);
  v1::Update update;
  if (outcome.own_rejection) {
    UpdateFromDecision(*outcome.own_rejection, &update);
    if (stream->Enqueue(std::move(update), true)) out.kicks.push_back(stream);
    return true;
  }
  if (machine.StatusOf(join.node) != NodeStatus::kMember) return false;
  Snapshot state = machine.State();
  RoundComplete again{state.round, state.members, 0, false, ""};
  for (const Member& m : state.members) again.world_size += m.local_world_size;
  again.store_on_rendezvous_port = stores_.Holds(run_id);
  UpdateFromDecision(again, &update);
  out.logs.push_back("rendezvous run '" + run_id + "': node " + ToString(join.node) +
                     " reconnected to running round " + std::to_string(state.round));
  if (stream->Enqueue(std::move(update), false)) out.kicks.push_back(stream);
  streams_.Install(stream, out);
  return true;
}

void RendezvousServer::Impl::ResumeNonMember(const std::string& run_id, const RendezvousMachine* machine,
                                             const rdzv::Join& join, JoinStream* stream, Outbox& out) {
  mu_.AssertHeld("ResumeNonMember");
  std::optional<NodeStatus> status = machine ? machine->StatusOf(join.node) : std::nullopt;
  if (status == NodeStatus::kParticipant || status == NodeStatus::kRedundant) {
    // The node has joined again since (its agent restarted the workers while
    // this reconnect waited for the server): this Join is stale.
    if (stream->RequestFinish(grpc::Status::OK)) out.kicks.push_back(stream);
    return;
  }
  v1::Update update;
  const uint64_t round = machine ? machine->Tally().round : 0;
  if (machine && machine->Tally().closed) {
    UpdateFromDecision(Closed{round, {join.node}}, &update);
    if (stream->Enqueue(std::move(update), true)) out.kicks.push_back(stream);
    return;
  }
  UpdateFromDecision(RestartRequested{round, RestartReason::kNodeLeft, join.node, {join.node}}, &update);
  out.logs.push_back("rendezvous run '" + run_id + "': node " + ToString(join.node) +
                     " reconnected, but is no longer a member of a running round: asked to restart");
  if (stream->Enqueue(std::move(update), false)) out.kicks.push_back(stream);
  streams_.Install(stream, out);
}

}  // namespace ctrun::rdzv
