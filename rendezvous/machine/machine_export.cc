// RendezvousMachine::Export and ::Import (declared in machine.h): the
// machine's state as plain data and back, with the invariants of machine.cc
// checked on the way in.
#include <set>

#include "rendezvous/machine/machine.h"

namespace ctrun::rdzv {

namespace {

Status Broken(const std::string& what) { return Status::InvalidArgument("rendezvous state: " + what); }

}  // namespace

MachineState RendezvousMachine::Export() const {
  MachineState s;
  s.params = params_;
  s.round = round_;
  s.complete = complete_;
  s.reforming = reforming_;
  s.closed = closed_;
  s.last_call = last_call_;
  s.members = members_;
  for (const auto& [id, rec] : nodes_) s.nodes.push_back(MachineState::Node{rec, id});
  for (const auto& [id, f] : finishing_) s.finishing.push_back(MachineState::FinishingNode{f, id});
  s.next_arrival = next_arrival_;
  s.latest_now = latest_now_;
  s.unhealthy = unhealthy_;
  s.unhealthy_nodes = unhealthy_nodes_;
  s.budget_closed = budget_closed_;
  s.preempt = preempt_;
  return s;
}

Result<RendezvousMachine> RendezvousMachine::Import(const MachineState& s) {
  if (Status st = ValidateParams(s.params); !st.ok()) return Broken(st.message());
  RendezvousMachine m(s.params);
  for (const MachineState::Node& n : s.nodes) {
    if (n.local_world_size < 1) return Broken("node " + ToString(n.id) + " has local_world_size below 1");
    if (n.status == NodeStatus::kMember && !s.complete) {
      return Broken("node " + ToString(n.id) + " is a member, but no round is complete");
    }
    if (n.status != NodeStatus::kMember && n.status != NodeStatus::kRedundant && s.complete) {
      return Broken("node " + ToString(n.id) + " is " + std::string(Name(n.status)) + " in a complete round");
    }
    auto [it, added] = m.nodes_.emplace(n.id, static_cast<const NodeRecord&>(n));
    if (!added) return Broken("node " + ToString(n.id) + " appears twice");
    m.Index(it->first, it->second);
  }
  if (s.closed && !m.nodes_.empty()) return Broken("a closed run holds nodes");
  if (!s.complete && !s.members.empty()) return Broken("a rank table, but no round is complete");
  if (s.complete && s.last_call) return Broken("a last call in a complete round");
  std::set<NodeId, NodeIdLess> ranked;
  // A closed run keeps the rank table of its last round but no nodes.
  for (size_t rank = 0; !s.closed && rank < s.members.size(); ++rank) {
    const Member& mem = s.members[rank];
    auto it = m.nodes_.find(mem.node);
    if (mem.group_rank != static_cast<int>(rank) || it == m.nodes_.end() ||
        it->second.status != NodeStatus::kMember || !ranked.insert(mem.node).second) {
      return Broken("rank table entry " + std::to_string(rank) + " (" + ToString(mem.node) +
                    ") is not a member holding that rank");
    }
  }
  if (s.complete && !s.closed && static_cast<int>(ranked.size()) != m.Count(NodeStatus::kMember)) {
    return Broken("a member is missing from the rank table");
  }
  for (const MachineState::FinishingNode& f : s.finishing) {
    if (!m.finishing_.emplace(f.id, static_cast<const Finishing&>(f)).second) {
      return Broken("finishing node " + ToString(f.id) + " appears twice");
    }
  }
  m.round_ = s.round;
  m.complete_ = s.complete;
  m.reforming_ = s.reforming;
  m.closed_ = s.closed;
  m.last_call_ = s.last_call;
  m.members_ = s.members;
  m.next_arrival_ = s.next_arrival;
  m.latest_now_ = s.latest_now;
  m.unhealthy_ = s.unhealthy;
  m.unhealthy_nodes_ = s.unhealthy_nodes;
  m.budget_closed_ = s.budget_closed;
  if (s.preempt && s.preempt->notices < 1) return Broken("a preemption notice counted fewer than once");
  m.preempt_ = s.preempt;
  return m;
}

}  // namespace ctrun::rdzv
