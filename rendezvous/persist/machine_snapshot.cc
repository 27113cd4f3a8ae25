#include "rendezvous/persist/machine_snapshot.h"

#include <algorithm>

#include "rendezvous_state.pb.h"

namespace ctrun::rdzv {

namespace pb = ::ctrun::rdzv::state::v1;

namespace {

constexpr uint32_t kFormat = 1;

int64_t ToUnixNs(TimePoint t, ClockPair now) {
  auto wall = now.wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(t - now.steady);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(wall.time_since_epoch()).count();
}

TimePoint FromUnixNs(int64_t ns, ClockPair now) {
  std::chrono::system_clock::time_point wall{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns))};
  return now.steady + std::chrono::duration_cast<Duration>(wall - now.wall);
}

int64_t Ns(Duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }
Duration FromNs(int64_t ns) { return std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(ns)); }

void KeyToProto(const NodeId& id, pb::NodeKey* out) {
  out->set_addr(id.addr);
  out->set_pid(id.pid);
  out->set_local_id(id.local_id);
}

NodeId KeyFromProto(const pb::NodeKey& k) { return NodeId{k.addr(), k.pid(), k.local_id()}; }

pb::NodeStatus StatusToProto(NodeStatus s) {
  switch (s) {
    case NodeStatus::kParticipant: return pb::PARTICIPANT;
    case NodeStatus::kMember: return pb::MEMBER;
    case NodeStatus::kRejoining: return pb::REJOINING;
    case NodeStatus::kRedundant: return pb::REDUNDANT;
  }
  return pb::NODE_STATUS_UNSPECIFIED;
}

}  // namespace

std::string EncodeRunState(const StoredRun& run, ClockPair now) {
  const MachineState& s = run.state;
  pb::RunState out;
  out.set_format(kFormat);
  out.set_run_id(run.run_id);
  pb::Params* p = out.mutable_params();
  p->set_min_nodes(s.params.min_nodes);
  p->set_max_nodes(s.params.max_nodes);
  p->set_join_timeout_ns(Ns(s.params.join_timeout));
  p->set_last_call_timeout_ns(Ns(s.params.last_call_timeout));
  p->set_close_timeout_ns(Ns(s.params.close_timeout));
  p->set_keep_alive_interval_ns(Ns(s.params.keep_alive_interval));
  p->set_keep_alive_max_attempt(s.params.keep_alive_max_attempt);
  p->set_has_max_unhealthy_nodes(true);
  p->set_max_unhealthy_nodes(s.params.max_unhealthy_nodes);
  out.set_round(s.round);
  out.set_complete(s.complete);
  out.set_reforming(s.reforming);
  out.set_closed(s.closed);
  if (s.last_call) out.set_last_call_unix_ns(ToUnixNs(*s.last_call, now));
  for (const Member& m : s.members) {
    pb::Member* pm = out.add_members();
    KeyToProto(m.node, pm->mutable_node());
    pm->set_group_rank(m.group_rank);
    pm->set_local_world_size(m.local_world_size);
    pm->set_addr(m.addr);
    pm->set_master_port(m.master_port);
  }
  for (const MachineState::Node& n : s.nodes) {
    pb::Node* pn = out.add_nodes();
    KeyToProto(n.id, pn->mutable_id());
    pn->set_incarnation(n.incarnation);
    pn->set_status(StatusToProto(n.status));
    if (n.hint_rank) pn->set_hint_rank(*n.hint_rank);
    pn->set_local_world_size(n.local_world_size);
    pn->set_addr(n.addr);
    pn->set_master_port(n.master_port);
    pn->set_last_seen_unix_ns(ToUnixNs(n.last_seen, now));
    if (n.join_deadline) pn->set_join_deadline_unix_ns(ToUnixNs(*n.join_deadline, now));
    if (n.previous_rank) pn->set_previous_rank(*n.previous_rank);
    pn->set_arrival(n.arrival);
  }
  for (const MachineState::FinishingNode& f : s.finishing) {
    pb::FinishingNode* pf = out.add_finishing();
    KeyToProto(f.id, pf->mutable_id());
    pf->set_incarnation(f.incarnation);
    pf->set_last_seen_unix_ns(ToUnixNs(f.last_seen, now));
  }
  out.set_next_arrival(s.next_arrival);
  out.set_latest_now_unix_ns(ToUnixNs(s.latest_now, now));
  out.set_unhealthy(s.unhealthy);
  for (const UnhealthyNode& u : s.unhealthy_nodes) {
    pb::UnhealthyNode* pu = out.add_unhealthy_nodes();
    KeyToProto(u.node, pu->mutable_node());
    pu->set_report(u.report);
  }
  out.set_budget_closed(s.budget_closed);
  return out.SerializeAsString();
}

Result<StoredRun> DecodeRunState(std::string_view bytes, ClockPair now) {
  pb::RunState in;
  if (!in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::InvalidArgument("not a ctrun run state (it does not parse)");
  }
  if (in.format() != kFormat) {
    return Status::InvalidArgument("not a ctrun run state of format 1 (format " + std::to_string(in.format()) +
                                   "; written by another ctrun version?)");
  }
  if (in.run_id().empty()) return Status::InvalidArgument("not a ctrun run state (no run id)");
  StoredRun run;
  run.run_id = in.run_id();
  MachineState& s = run.state;
  const pb::Params& p = in.params();
  s.params.min_nodes = p.min_nodes();
  s.params.max_nodes = p.max_nodes();
  s.params.join_timeout = FromNs(p.join_timeout_ns());
  s.params.last_call_timeout = FromNs(p.last_call_timeout_ns());
  s.params.close_timeout = FromNs(p.close_timeout_ns());
  s.params.keep_alive_interval = FromNs(p.keep_alive_interval_ns());
  s.params.keep_alive_max_attempt = p.keep_alive_max_attempt();
  s.params.max_unhealthy_nodes = p.has_max_unhealthy_nodes() ? p.max_unhealthy_nodes() : -1;
  s.round = in.round();
  s.complete = in.complete();
  s.reforming = in.reforming();
  s.closed = in.closed();
  if (in.has_last_call_unix_ns()) s.last_call = FromUnixNs(in.last_call_unix_ns(), now);
  for (const pb::Member& pm : in.members()) {
    s.members.push_back(
        Member{KeyFromProto(pm.node()), pm.group_rank(), pm.local_world_size(), pm.addr(), pm.master_port()});
  }
  for (const pb::Node& pn : in.nodes()) {
    MachineState::Node n;
    n.id = KeyFromProto(pn.id());
    n.incarnation = pn.incarnation();
    switch (pn.status()) {
      case pb::PARTICIPANT: n.status = NodeStatus::kParticipant; break;
      case pb::MEMBER: n.status = NodeStatus::kMember; break;
      case pb::REJOINING: n.status = NodeStatus::kRejoining; break;
      case pb::REDUNDANT: n.status = NodeStatus::kRedundant; break;
      default:
        return Status::InvalidArgument("not a ctrun run state (node " + ToString(n.id) + " has status " +
                                       std::to_string(static_cast<int>(pn.status())) + ")");
    }
    if (pn.has_hint_rank()) n.hint_rank = pn.hint_rank();
    n.local_world_size = pn.local_world_size();
    n.addr = pn.addr();
    n.master_port = pn.master_port();
    n.last_seen = FromUnixNs(pn.last_seen_unix_ns(), now);
    if (pn.has_join_deadline_unix_ns()) n.join_deadline = FromUnixNs(pn.join_deadline_unix_ns(), now);
    if (pn.has_previous_rank()) n.previous_rank = pn.previous_rank();
    n.arrival = pn.arrival();
    s.nodes.push_back(std::move(n));
  }
  for (const pb::FinishingNode& pf : in.finishing()) {
    s.finishing.push_back(MachineState::FinishingNode{{pf.incarnation(), FromUnixNs(pf.last_seen_unix_ns(), now)},
                                                      KeyFromProto(pf.id())});
  }
  s.next_arrival = in.next_arrival();
  s.latest_now = FromUnixNs(in.latest_now_unix_ns(), now);
  s.unhealthy = in.unhealthy();
  for (const pb::UnhealthyNode& pu : in.unhealthy_nodes()) {
    s.unhealthy_nodes.push_back(UnhealthyNode{KeyFromProto(pu.node()), pu.report()});
  }
  s.budget_closed = in.budget_closed();
  return run;
}

void ForgiveOutage(MachineState& state, TimePoint now) {
  for (MachineState::Node& n : state.nodes) n.last_seen = std::max(n.last_seen, now);
  for (MachineState::FinishingNode& f : state.finishing) f.last_seen = std::max(f.last_seen, now);
}

}  // namespace ctrun::rdzv
