#include "rendezvous/grpc/convert/ft_convert.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv {

QuorumParams FtParamsFromProto(const v1::FtParams& params) {
  return QuorumParams{.min_replicas = params.min_replicas(),
                      .max_replicas = params.max_replicas(),
                      .join_timeout = DurationFromSeconds(params.join_timeout_s()),
                      .heartbeat_timeout = DurationFromSeconds(params.heartbeat_timeout_s())};
}

void FtParamsToProto(const QuorumParams& params, v1::FtParams* out) {
  out->set_min_replicas(params.min_replicas);
  out->set_max_replicas(params.max_replicas);
  out->set_join_timeout_s(SecondsOf(params.join_timeout));
  out->set_heartbeat_timeout_s(SecondsOf(params.heartbeat_timeout));
}

FtPart FtPartFromProto(const v1::FtSyncRequest& request) {
  return FtPart{.part = request.part(), .parts = request.parts() == 0 ? 1 : int64_t{request.parts()}};
}

SyncCall SyncCallFromProto(const v1::FtSyncRequest& request) {
  SyncCall call{.group = request.group(), .committed_step = request.committed_step(), .address = request.address(),
                .ballot = std::nullopt};
  if (request.has_ballot()) {
    call.ballot = Ballot{.quorum_id = request.ballot().quorum_id(), .step = request.ballot().step(),
                         .ok = request.ballot().ok(), .late = !request.ballot().ok() && request.ballot().late(),
                         .world = std::max(0, request.ballot().world())};
  }
  return call;
}

void SyncCallToProto(const SyncCall& call, v1::FtSyncRequest* out) {
  out->set_group(call.group);
  out->set_committed_step(call.committed_step);
  out->set_address(call.address);
  if (call.ballot) {
    out->mutable_ballot()->set_quorum_id(call.ballot->quorum_id);
    out->mutable_ballot()->set_step(call.ballot->step);
    out->mutable_ballot()->set_ok(call.ballot->ok);
    out->mutable_ballot()->set_late(call.ballot->late);
    out->mutable_ballot()->set_world(call.ballot->world);
  }
}

namespace {

void MemberToProto(const QuorumMember& m, v1::FtMember* p) {
  p->set_group(m.id);
  p->set_step(m.step);
  p->set_address(m.address);
  p->set_commit_failures(m.commit_failures);
}

void MembersToProto(const std::vector<QuorumMember>& members,
                    google::protobuf::RepeatedPtrField<v1::FtMember>* out) {
  out->Reserve(static_cast<int>(members.size()));
  for (const QuorumMember& m : members) MemberToProto(m, out->Add());
}

QuorumMember MemberFromProto(const v1::FtMember& m) {
  return QuorumMember{.id = m.group(), .step = m.step(), .address = m.address(),
                      .commit_failures = m.commit_failures()};
}

std::vector<QuorumMember> MembersFromProto(const google::protobuf::RepeatedPtrField<v1::FtMember>& members) {
  std::vector<QuorumMember> out;
  out.reserve(static_cast<size_t>(members.size()));
  for (const v1::FtMember& m : members) out.push_back(MemberFromProto(m));
  return out;
}

// `quorum` is the one `part` points into: its members go along when it is
// small (kCompactMembersMax).
void CompactToProto(const CompactPart& part, const Quorum& quorum, v1::FtCompact* out) {
  out->set_rank(part.rank);
  out->set_world(part.world);
  out->set_max_step(part.max_step);
  if (part.right) MemberToProto(*part.right, out->mutable_right());
  out->set_heal(part.heal);
  out->set_serve(part.serve);
  for (const QuorumMember* m : part.sources) MemberToProto(*m, out->add_sources());
  if (quorum.members.size() <= kCompactMembersMax) MembersToProto(quorum.members, out->mutable_members());
}

QuorumPart CompactFromProto(const v1::FtCompact& c) {
  QuorumPart part{.rank = c.rank(), .world = c.world(), .max_step = c.max_step(), .right = std::nullopt,
                  .heal = c.heal(), .serve = c.serve(), .sources = MembersFromProto(c.sources()),
                  .members = MembersFromProto(c.members())};
  if (c.has_right()) part.right = MemberFromProto(c.right());
  return part;
}

}  // namespace

void SyncAnswerToProto(const SyncAnswer& answer, v1::FtSyncReply* out, uint32_t compact_sources) {
  out->set_has_commit(answer.commit.has_value());
  out->set_commit(answer.commit.value_or(false));
  out->set_quorum_id(answer.quorum->id);
  if (compact_sources == 0) {
    MembersToProto(answer.quorum->members, out->mutable_members());
  } else if (!answer.finished_step) {
    const std::shared_ptr<const QuorumLookup> lookup =
        answer.lookup ? answer.lookup : std::make_shared<const QuorumLookup>(answer.quorum);
    if (std::optional<CompactPart> part = lookup->PartOf(answer.group, compact_sources)) {
      CompactToProto(*part, lookup->quorum(), out->mutable_compact());
    }
  }
  out->set_finished(answer.finished_step.has_value());
  out->set_finished_step(answer.finished_step.value_or(0));
}

SyncAnswer SyncAnswerFromProto(const std::string& group, const v1::FtSyncReply& reply) {
  SyncAnswer answer{.group = group, .commit = std::nullopt,
                    .quorum = std::make_shared<const Quorum>(
                        Quorum{.id = reply.quorum_id(), .members = MembersFromProto(reply.members())})};
  if (reply.has_compact()) answer.part = CompactFromProto(reply.compact());
  if (reply.has_commit()) answer.commit = reply.commit();
  if (reply.finished()) answer.finished_step = reply.finished_step();
  return answer;
}

void FtRunViewToProto(const FtRunView& view, v1::FtRunState* out) {
  out->set_min_replicas(view.min_replicas);
  out->set_max_replicas(view.max_replicas);
  out->set_has_quorum(view.quorum.has_value());
  if (view.quorum) {
    out->set_quorum_id(view.quorum->id);
    MembersToProto(view.quorum->members, out->mutable_members());
  }
  for (const std::string& g : view.groups) out->add_groups(g);
  for (const std::string& g : view.waiting) out->add_waiting(g);
  out->set_reason(view.reason);
}

FtRunView FtRunViewFromProto(const v1::FtRunState& state) {
  FtRunView view{.min_replicas = state.min_replicas(), .max_replicas = state.max_replicas(), .quorum = std::nullopt,
                 .groups = {state.groups().begin(), state.groups().end()},
                 .waiting = {state.waiting().begin(), state.waiting().end()}, .reason = state.reason()};
  if (state.has_quorum()) view.quorum = Quorum{.id = state.quorum_id(), .members = MembersFromProto(state.members())};
  return view;
}

}  // namespace ctrun::rdzv
