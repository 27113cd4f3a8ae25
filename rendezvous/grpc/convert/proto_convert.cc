#include "rendezvous/grpc/convert/proto_convert.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <utility>

#include "rendezvous/grpc/convert/failure_convert.h"
#include "rendezvous/grpc/convert/ft_convert.h"
#include "rendezvous/grpc/convert/preempt_convert.h"

namespace ctrun::rdzv {

Duration DurationFromSeconds(double s) {
  constexpr double kMaxSeconds = 1e8;  // ~3 years: "forever", and no overflow of now + d
  if (!std::isfinite(s) || s <= 0) return Duration::zero();
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(std::min(s, kMaxSeconds)));
}

double SecondsOf(Duration d) { return std::chrono::duration<double>(d).count(); }

namespace {

v1::Admitted::State AdmitStateToProto(AdmitState state) {
  switch (state) {
    case AdmitState::kParticipant: return v1::Admitted::PARTICIPANT;
    case AdmitState::kWaiting: return v1::Admitted::WAITING;
    case AdmitState::kRedundant: return v1::Admitted::REDUNDANT;
  }
  return v1::Admitted::STATE_UNSPECIFIED;
}

v1::RestartRequested::Reason RestartReasonToProto(RestartReason reason) {
  switch (reason) {
    case RestartReason::kNodeJoinedWaitList: return v1::RestartRequested::NODE_JOINED;
    case RestartReason::kNodeLost: return v1::RestartRequested::NODE_LOST;
    case RestartReason::kNodeLeft: return v1::RestartRequested::NODE_LEFT;
    case RestartReason::kWorkersFailed: return v1::RestartRequested::WORKERS_FAILED;
  }
  return v1::RestartRequested::REASON_UNSPECIFIED;
}

void MemberToProto(const Member& member, v1::Member* out) {
  NodeToProto(member.node, out->mutable_node());
  out->set_group_rank(member.group_rank);
  out->set_local_world_size(member.local_world_size);
  out->set_addr(member.addr);
  out->set_master_port(member.master_port);
}

// Overloads for std::visit over Decision.
struct UpdateWriter {
  v1::Update* out;

  void operator()(const Admitted& d) const {
    v1::Admitted* a = out->mutable_admitted();
    a->set_state(AdmitStateToProto(d.state));
    a->set_round(d.round);
  }
  void operator()(const RoundComplete& d) const {
    RoundCompleteForPush(d, out->mutable_round_complete());
    for (size_t i = 1; i < d.members.size(); ++i) AddWholeMember(d, i, out->mutable_round_complete());
  }
  void operator()(const RestartRequested& d) const {
    v1::RestartRequested* r = out->mutable_restart_requested();
    r->set_round(d.round);
    r->set_reason(RestartReasonToProto(d.reason));
    NodeToProto(d.cause, r->mutable_cause());
  }
  void operator()(const Rejected& d) const {
    v1::Rejected* r = out->mutable_rejected();
    r->set_code(RejectCodeToProto(d.code));
    r->set_message(d.message);
  }
  void operator()(const TimedOut& d) const { out->mutable_timed_out()->set_message(d.message); }
  void operator()(const Evicted& d) const { out->mutable_evicted()->set_message(d.message); }
  void operator()(const Closed& d) const {
    v1::Closed* c = out->mutable_closed();
    c->set_round(d.round);
    if (d.unhealthy_budget_exceeded) {
      c->set_unhealthy_budget_exceeded(true);
      c->set_message(d.message);
    }
    c->set_failed_exit(d.failed_exit);
    if (d.verdict) VerdictToProto(*d.verdict, c->mutable_verdict());
  }
  void operator()(const PreemptNotice& d) const { PreemptNoticeToProto(d, out->mutable_preempt_notice()); }
};

void NodesToProto(const std::vector<NodeId>& nodes, google::protobuf::RepeatedPtrField<v1::NodeId>* out) {
  for (const NodeId& n : nodes) NodeToProto(n, out->Add());
}

}  // namespace

NodeId NodeFromProto(const v1::NodeId& node) { return NodeId{node.addr(), node.pid(), node.local_id()}; }

void NodeToProto(const NodeId& node, v1::NodeId* out) {
  out->set_addr(node.addr);
  out->set_pid(node.pid);
  out->set_local_id(node.local_id);
}

Params ParamsFromProto(const v1::RunParams& params) {
  Params p;
  p.min_nodes = params.min_nodes();
  p.max_nodes = params.max_nodes();
  p.join_timeout = DurationFromSeconds(params.join_timeout_s());
  p.last_call_timeout = DurationFromSeconds(params.last_call_timeout_s());
  p.close_timeout = DurationFromSeconds(params.close_timeout_s());
  p.keep_alive_interval = DurationFromSeconds(params.keep_alive_interval_s());
  p.keep_alive_max_attempt = params.keep_alive_max_attempt();
  if (params.has_max_unhealthy_nodes()) p.max_unhealthy_nodes = params.max_unhealthy_nodes();
  return p;
}

void ParamsToProto(const Params& params, v1::RunParams* out) {
  out->set_min_nodes(params.min_nodes);
  out->set_max_nodes(params.max_nodes);
  out->set_join_timeout_s(SecondsOf(params.join_timeout));
  out->set_last_call_timeout_s(SecondsOf(params.last_call_timeout));
  out->set_close_timeout_s(SecondsOf(params.close_timeout));
  out->set_keep_alive_interval_s(SecondsOf(params.keep_alive_interval));
  out->set_keep_alive_max_attempt(params.keep_alive_max_attempt);
  if (params.max_unhealthy_nodes >= 0) {
    out->set_has_max_unhealthy_nodes(true);
    out->set_max_unhealthy_nodes(params.max_unhealthy_nodes);
  }
}

Join JoinFromProto(const v1::JoinRequest& request, const std::string& peer_ip) {
  Join join;
  join.node = NodeFromProto(request.node());
  join.incarnation = request.incarnation();
  if (request.has_hint_rank()) join.hint_rank = request.hint_rank();
  join.local_world_size = request.local_world_size();
  join.addr = request.addr().empty() ? peer_ip : request.addr();
  join.master_port = request.master_port();
  return join;
}

Result<LeaveReason> LeaveReasonFromProto(v1::LeaveRequest::Reason reason) {
  switch (reason) {
    case v1::LeaveRequest::NORMAL_EXIT: return LeaveReason::kNormalExit;
    case v1::LeaveRequest::FAILED_EXIT: return LeaveReason::kFailedExit;
    case v1::LeaveRequest::FAILURE: return LeaveReason::kFailure;
    case v1::LeaveRequest::SIGNAL: return LeaveReason::kSignal;
    case v1::LeaveRequest::UNHEALTHY: return LeaveReason::kUnhealthy;
    default: break;
  }
  return Status::InvalidArgument("LeaveRequest.reason " + std::to_string(static_cast<int>(reason)) +
                                 ": expected NORMAL_EXIT, FAILED_EXIT, FAILURE, SIGNAL or UNHEALTHY (use the same ctrun version on every node)");
}

void UpdateFromDecision(const Decision& decision, v1::Update* out) { std::visit(UpdateWriter{out}, decision); }

v1::Rejected::Code RejectCodeToProto(RejectCode code) {
  switch (code) {
    case RejectCode::kClosed: return v1::Rejected::CLOSED;
    case RejectCode::kDuplicateNode: return v1::Rejected::DUPLICATE_NODE;
    case RejectCode::kUnknownNode: return v1::Rejected::UNKNOWN_NODE;
    case RejectCode::kInvalidJoin: return v1::Rejected::INVALID_JOIN;
    case RejectCode::kUnhealthyBudget: return v1::Rejected::UNHEALTHY_BUDGET;
  }
  return v1::Rejected::CODE_UNSPECIFIED;
}

void RejectedFromRegistryError(const Status& error, v1::Rejected* out) {
  out->set_code(error.IsNotFound() ? v1::Rejected::UNKNOWN_RUN : v1::Rejected::BAD_PARAMS);
  out->set_message(error.message());
}

void StateReplyFromCounts(const Counts& counts, TimePoint now, v1::StateReply* out) {
  out->set_round(counts.round);
  out->set_complete(counts.complete);
  out->set_closed(counts.closed);
  out->set_min_nodes(counts.min_nodes);
  out->set_max_nodes(counts.max_nodes);
  out->set_participant_count(counts.participants);
  out->set_rejoining_count(counts.rejoining);
  out->set_redundant_count(counts.redundant);
  out->set_member_count(counts.members);
  double last_call = -1;
  if (counts.last_call_deadline) last_call = std::max(0.0, SecondsOf(*counts.last_call_deadline - now));
  out->set_last_call_in_s(last_call);
  out->set_live_nodes(counts.live_nodes);
  out->set_unhealthy_count(counts.unhealthy);
  out->set_max_unhealthy(counts.max_unhealthy);
}

Counts CountsFromStateReply(const v1::StateReply& reply, TimePoint now) {
  Counts c;
  c.round = reply.round();
  c.complete = reply.complete();
  c.closed = reply.closed();
  c.min_nodes = reply.min_nodes();
  c.max_nodes = reply.max_nodes();
  c.participants = reply.participant_count();
  c.rejoining = reply.rejoining_count();
  c.redundant = reply.redundant_count();
  c.members = reply.member_count();
  c.live_nodes = reply.live_nodes();
  c.unhealthy = reply.unhealthy_count();
  c.max_unhealthy = reply.max_unhealthy();
  if (reply.last_call_in_s() >= 0) {
    c.last_call_deadline =
        now + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(reply.last_call_in_s()));
  }
  return c;
}

void StateReplyAddView(const RunView& view, v1::StateReply* out) {
  out->set_world_size(view.world_size);
  for (const NodeView& n : view.nodes) {
    v1::NodeView* p = out->add_nodes();
    NodeToProto(n.node, p->mutable_node());
    p->set_state(n.state);
    p->set_group_rank(n.group_rank.value_or(-1));
    p->set_local_world_size(n.local_world_size);
    p->set_addr(n.addr);
    p->set_last_seen_s(n.last_seen_s);
    p->set_median_step_s(n.median_step_s.value_or(0));
    for (int r : n.straggler_ranks) p->add_straggler_ranks(r);
  }
  for (const UnhealthyNode& u : view.unhealthy) {
    v1::UnhealthyNode* p = out->add_unhealthy();
    NodeToProto(u.node, p->mutable_node());
    p->set_report(u.report);
  }
  for (const ReportedFailure& f : view.failures) ReportedFailureToProto(f, out->add_failures());
  out->set_failures_seen(static_cast<int32_t>(std::min<int64_t>(view.failures_seen, INT32_MAX)));
}

RunView RunViewFromStateReply(const v1::StateReply& reply, TimePoint now) {
  RunView view;
  view.run_id = reply.run_id();
  view.has_rendezvous = !reply.no_rendezvous_run();
  if (reply.has_ft()) view.ft = FtRunViewFromProto(reply.ft());
  view.counts = CountsFromStateReply(reply, now);
  view.world_size = reply.world_size();
  for (const v1::NodeView& p : reply.nodes()) {
    NodeView n;
    n.node = NodeFromProto(p.node());
    n.state = p.state();
    if (p.group_rank() >= 0) n.group_rank = p.group_rank();
    n.local_world_size = p.local_world_size();
    n.addr = p.addr();
    n.last_seen_s = p.last_seen_s();
    if (p.median_step_s() > 0) n.median_step_s = p.median_step_s();
    n.straggler_ranks.assign(p.straggler_ranks().begin(), p.straggler_ranks().end());
    view.nodes.push_back(std::move(n));
  }
  for (const v1::UnhealthyNode& p : reply.unhealthy()) {
    view.unhealthy.push_back(UnhealthyNode{NodeFromProto(p.node()), p.report()});
  }
  for (const v1::ReportedFailure& p : reply.failures()) view.failures.push_back(ReportedFailureFromProto(p));
  view.failures_seen = reply.failures_seen();
  return view;
}

void StateReplyFromSnapshot(const Snapshot& snapshot, TimePoint now, v1::StateReply* out) {
  out->set_participant_count(static_cast<int>(snapshot.participants.size()));
  out->set_rejoining_count(static_cast<int>(snapshot.rejoining.size()));
  out->set_redundant_count(static_cast<int>(snapshot.redundant.size()));
  out->set_member_count(static_cast<int>(snapshot.members.size()));
  out->set_round(snapshot.round);
  out->set_complete(snapshot.complete);
  out->set_closed(snapshot.closed);
  out->set_min_nodes(snapshot.min_nodes);
  out->set_max_nodes(snapshot.max_nodes);
  NodesToProto(snapshot.participants, out->mutable_participants());
  NodesToProto(snapshot.rejoining, out->mutable_rejoining());
  NodesToProto(snapshot.redundant, out->mutable_redundant());
  for (const Member& m : snapshot.members) MemberToProto(m, out->add_members());
  double last_call = -1;
  if (snapshot.last_call_deadline) last_call = std::max(0.0, SecondsOf(*snapshot.last_call_deadline - now));
  out->set_last_call_in_s(last_call);
  out->set_live_nodes(snapshot.live_nodes);
  out->set_unhealthy_count(snapshot.unhealthy);
  out->set_max_unhealthy(snapshot.max_unhealthy);
  for (const UnhealthyNode& u : snapshot.unhealthy_nodes) {
    v1::UnhealthyNode* p = out->add_unhealthy();
    NodeToProto(u.node, p->mutable_node());
    p->set_report(u.report);
  }
}

Rejected RejectedFromProto(const NodeId& self, const v1::Rejected& r) {
  Rejected out;
  out.node = self;
  out.message = r.message();
  switch (r.code()) {
    case v1::Rejected::CLOSED: out.code = RejectCode::kClosed; break;
    case v1::Rejected::DUPLICATE_NODE: out.code = RejectCode::kDuplicateNode; break;
    case v1::Rejected::UNKNOWN_NODE: out.code = RejectCode::kUnknownNode; break;
    case v1::Rejected::UNHEALTHY_BUDGET: out.code = RejectCode::kUnhealthyBudget; break;
    default: out.code = RejectCode::kInvalidJoin; break;
  }
  return out;
}

namespace {

// A RoundComplete push. A malformed size list (pairs that do not pair up, a
// count or size that is not positive, more than kMaxRoundNodes nodes, sizes
// that do not sum to world_size) leaves the round without members: the
// agent then says it is not in it.
RoundComplete RoundCompleteFromProto(const v1::RoundComplete& rc) {
  RoundComplete out;
  out.round = rc.round();
  out.world_size = rc.world_size();
  out.hint_note = rc.hint_note();
  out.store_on_rendezvous_port = rc.store_on_rendezvous_port();
  bool valid = rc.local_world_size_values_size() == rc.local_world_size_counts_size();
  int64_t nodes_listed = 0, workers = 0;
  for (int i = 0; valid && i < rc.local_world_size_values_size(); ++i) {
    const int64_t value = rc.local_world_size_values(i), count = rc.local_world_size_counts(i);
    valid = value > 0 && count > 0 && nodes_listed + count <= kMaxRoundNodes;
    nodes_listed += count;
    workers += value * count;
  }
  if (valid && workers == rc.world_size()) {
    out.members.reserve(static_cast<size_t>(nodes_listed));
    for (int i = 0; i < rc.local_world_size_values_size(); ++i) {
      for (int k = 0; k < rc.local_world_size_counts(i); ++k) {
        Member& m = out.members.emplace_back();
        m.group_rank = static_cast<int>(out.members.size()) - 1;
        m.local_world_size = rc.local_world_size_values(i);
      }
    }
  }
  const int nodes = static_cast<int>(out.members.size());
  // A whole member outside the size list is dropped: the agent then
  // finds itself missing from the round and says so.
  for (const v1::Member& m : rc.members()) {
    if (m.group_rank() < 0 || m.group_rank() >= nodes) continue;
    Member& member = out.members[m.group_rank()];
    member.node = NodeFromProto(m.node());
    member.addr = m.addr();
    member.master_port = m.master_port();
  }
  return out;
}

}  // namespace

Decision DecisionFromUpdate(const NodeId& self, const v1::Update& u) {
  switch (u.kind_case()) {
    case v1::Update::kAdmitted: {
      Admitted a{self, AdmitState::kParticipant, u.admitted().round()};
      if (u.admitted().state() == v1::Admitted::WAITING) a.state = AdmitState::kWaiting;
      if (u.admitted().state() == v1::Admitted::REDUNDANT) a.state = AdmitState::kRedundant;
      return a;
    }
    case v1::Update::kRoundComplete:
      return RoundCompleteFromProto(u.round_complete());
    case v1::Update::kRestartRequested: {
      const v1::RestartRequested& r = u.restart_requested();
      RestartRequested out;
      out.round = r.round();
      out.cause = NodeFromProto(r.cause());
      out.nodes = {self};
      out.reason = r.reason() == v1::RestartRequested::NODE_JOINED      ? RestartReason::kNodeJoinedWaitList
                   : r.reason() == v1::RestartRequested::NODE_LOST      ? RestartReason::kNodeLost
                   : r.reason() == v1::RestartRequested::WORKERS_FAILED ? RestartReason::kWorkersFailed
                                                                        : RestartReason::kNodeLeft;
      return out;
    }
    case v1::Update::kRejected:
      return RejectedFromProto(self, u.rejected());
    case v1::Update::kTimedOut:
      return TimedOut{self, u.timed_out().message()};
    case v1::Update::kEvicted:
      return Evicted{self, u.evicted().message()};
    case v1::Update::kPreemptNotice:
      return PreemptNoticeFromProto(self, u.preempt_notice());
    case v1::Update::kClosed:
    case v1::Update::KIND_NOT_SET:
      break;
  }
  Closed closed{u.closed().round(), {self}, u.closed().unhealthy_budget_exceeded(), u.closed().message()};
  closed.failed_exit = u.closed().failed_exit();
  if (u.closed().has_verdict()) {
    // A verdict the client cannot take is left out: the run still closes.
    if (Result<VerdictSummary> v = VerdictFromProto(u.closed().verdict()); v.ok()) closed.verdict = std::move(*v);
  }
  return closed;
}

std::string PeerIp(std::string_view peer) {
  constexpr std::string_view kV4 = "ipv4:";
  constexpr std::string_view kV6 = "ipv6:";
  if (peer.starts_with(kV4)) {
    peer.remove_prefix(kV4.size());
    size_t colon = peer.rfind(':');
    return std::string(colon == std::string_view::npos ? peer : peer.substr(0, colon));
  }
  if (!peer.starts_with(kV6)) return "";
  peer.remove_prefix(kV6.size());
  std::string_view open = "[", close = "]";
  if (peer.starts_with("%5B") || peer.starts_with("%5b")) open = peer.substr(0, 3), close = "%5D";
  if (!peer.starts_with(open)) return "";
  peer.remove_prefix(open.size());
  size_t end = peer.find(close);
  if (end == std::string_view::npos && close == "%5D") end = peer.find("%5d");
  if (end == std::string_view::npos) return "";
  std::string ip(peer.substr(0, end));
  // A zone id is written "%25eth0" inside a URI; keep it as "%eth0".
  if (size_t zone = ip.find("%25"); zone != std::string::npos) ip.erase(zone + 1, 2);
  return ip;
}

void RoundCompleteForPush(const RoundComplete& d, v1::RoundComplete* out) {
  out->set_round(d.round);
  out->set_world_size(d.world_size);
  out->set_hint_note(d.hint_note);
  out->set_store_on_rendezvous_port(d.store_on_rendezvous_port);
  for (size_t i = 0; i < d.members.size(); ++i) {
    const int value = d.members[i].local_world_size;
    const int last = out->local_world_size_values_size() - 1;
    if (last >= 0 && out->local_world_size_values(last) == value) {
      out->set_local_world_size_counts(last, out->local_world_size_counts(last) + 1);
    } else {
      out->add_local_world_size_values(value);
      out->add_local_world_size_counts(1);
    }
  }
  if (!d.members.empty()) MemberToProto(d.members[0], out->add_members());
}

void AddWholeMember(const RoundComplete& d, size_t index, v1::RoundComplete* out) {
  MemberToProto(d.members[index], out->add_members());
}

void StepReportToProto(const StepReport& report, v1::StepReport* out) {
  out->set_round(report.round);
  out->set_straggler_factor(report.params.factor);
  out->set_straggler_intervals(report.params.intervals);
  for (const RankStep& r : report.ranks) {
    v1::RankStep* p = out->add_ranks();
    p->set_rank(r.rank);
    p->set_local_rank(r.local_rank);
    p->set_step_s(SecondsOf(r.step));
    p->set_step_count(r.steps);
  }
}

StepReport StepReportFromProto(const v1::StepReport& report) {
  StepReport out;
  out.round = report.round();
  out.params.factor = std::max(0.0, report.straggler_factor());
  out.params.intervals = std::max(1, report.straggler_intervals());
  out.ranks.reserve(report.ranks_size());
  for (const v1::RankStep& p : report.ranks()) {
    out.ranks.push_back(RankStep{p.rank(), p.local_rank(), DurationFromSeconds(p.step_s()), p.step_count()});
  }
  return out;
}

void StragglerChangeToProto(const StragglerChange& change, v1::StragglerChange* out) {
  out->set_rank(change.rank);
  out->set_local_rank(change.local_rank);
  out->set_slow(change.slow);
  out->set_step_s(SecondsOf(change.step));
  out->set_job_median_s(SecondsOf(change.job_median));
  out->set_straggler_factor(change.params.factor);
  out->set_straggler_intervals(change.params.intervals);
}

StragglerChange StragglerChangeFromProto(const NodeId& self, const v1::StragglerChange& change) {
  return StragglerChange{self,
                         change.rank(),
                         change.local_rank(),
                         change.slow(),
                         DurationFromSeconds(change.step_s()),
                         DurationFromSeconds(change.job_median_s()),
                         StragglerParams{change.straggler_factor(), change.straggler_intervals()}};
}

}  // namespace ctrun::rdzv
