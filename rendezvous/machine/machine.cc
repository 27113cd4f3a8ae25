#include "rendezvous/machine/machine.h"

#include <algorithm>
#include <utility>

#include "rendezvous/machine/group_ranks.h"

namespace ctrun::rdzv {

// Invariants (outside Step):
//  * complete_ == true  => every node is kMember or kRedundant; members_ is
//    the rank table of the kMember nodes; last_call_ is empty.
//  * complete_ == false => no node is kMember; and
//    #participants + #rejoining <= max_nodes, with spares only when it is
//    equal; last_call_ is set iff #participants >= min_nodes.
//  * closed_ => nodes_ is empty.

std::string_view Name(NodeStatus status) {
  switch (status) {
    case NodeStatus::kParticipant: return "participant";
    case NodeStatus::kMember: return "member";
    case NodeStatus::kRejoining: return "rejoining";
    case NodeStatus::kRedundant: return "redundant";
  }
  return "?";
}

Result<RendezvousMachine> RendezvousMachine::Create(const Params& params) {
  Status status = ValidateParams(params);
  if (!status.ok()) return status;
  return RendezvousMachine(params);
}

std::vector<Decision> RendezvousMachine::Step(const Event& event, TimePoint now) {
  now = std::max(now, latest_now_);
  latest_now_ = now;
  std::vector<Decision> out;
  if (closed_) {
    if (const Join* join = std::get_if<Join>(&event); join && !budget_closed_.empty()) {
      out.push_back(Rejected{join->node, RejectCode::kUnhealthyBudget, budget_closed_});
    } else if (join) {
      out.push_back(Rejected{join->node, RejectCode::kClosed,
                             "run is closed (the job finished or an agent closed it): node " +
                                 ToString(join->node) + " cannot join; start a new job with a new --rdzv-id"});
    }
    StepFinishing(event, now, out);
    return out;
  }
  ApplyDeadlinesUntil(now, out);
  if (const Join* e = std::get_if<Join>(&event)) OnJoin(*e, now, out);
  if (const KeepAlive* e = std::get_if<KeepAlive>(&event)) OnKeepAlive(*e, now, out);
  if (const Leave* e = std::get_if<Leave>(&event)) OnLeave(*e, now, out);
  if (std::holds_alternative<Close>(event)) DoClose(out);
  Reconcile(now, out);
  return out;
}

void RendezvousMachine::OnJoin(const Join& join, TimePoint now, std::vector<Decision>& out) {
  const std::string who = "node " + ToString(join.node);
  if (join.local_world_size <= 0) {
    out.push_back(Rejected{join.node, RejectCode::kInvalidJoin,
                           who + ": local_world_size " + std::to_string(join.local_world_size) +
                               " must be at least 1 (check --nproc-per-node)"});
    return;
  }
  if (join.hint_rank && *join.hint_rank < 0) {
    out.push_back(Rejected{join.node, RejectCode::kInvalidJoin,
                           who + ": --node-rank " + std::to_string(*join.hint_rank) +
                               " must not be negative (give 0..nnodes-1, or leave it out)"});
    return;
  }

  auto it = nodes_.find(join.node);
  if (it != nodes_.end() && it->second.incarnation != join.incarnation) {
    out.push_back(Rejected{join.node, RejectCode::kDuplicateNode,
                           who + " is already in the run as another live agent: give each agent a distinct "
                                 "--local-addr, or retry after " +
                               FormatSeconds(KeepAliveTimeout(params_)) + " if the old agent died"});
    return;
  }

  if (it != nodes_.end()) {
    NodeRecord& rec = it->second;
    rec.hint_rank = join.hint_rank;
    rec.local_world_size = join.local_world_size;
    rec.addr = join.addr;
    rec.master_port = join.master_port;
    rec.last_seen = now;
    switch (rec.status) {
      case NodeStatus::kParticipant:
        out.push_back(Admitted{join.node, AdmitState::kParticipant, round_});
        return;
      case NodeStatus::kRedundant:
        out.push_back(Admitted{join.node, AdmitState::kRedundant, round_});
        return;
      case NodeStatus::kRejoining:
        MakeParticipant(rec, now);
        out.push_back(Admitted{join.node, AdmitState::kParticipant, round_});
        return;
      case NodeStatus::kMember:
        // It restarted its workers without a Leave: same as Leave{kFailure} + Join.
        rec.status = NodeStatus::kRejoining;
        BreakRound(RestartReason::kNodeLeft, join.node, now, out);
        MakeParticipant(rec, now);
        out.push_back(Admitted{join.node, AdmitState::kParticipant, round_});
        return;
    }
  }

  NodeRecord rec;
  rec.incarnation = join.incarnation;
  rec.hint_rank = join.hint_rank;
  rec.local_world_size = join.local_world_size;
  rec.addr = join.addr;
  rec.master_port = join.master_port;
  rec.last_seen = now;
  rec.arrival = next_arrival_++;
  AdmitState state = AdmitState::kParticipant;
  if (complete_) {
    if (static_cast<int>(members_.size()) < params_.max_nodes) {
      BreakRound(RestartReason::kNodeJoinedWaitList, join.node, now, out);
      state = AdmitState::kWaiting;
    } else {
      state = AdmitState::kRedundant;
    }
  } else if (Count(NodeStatus::kParticipant) + Count(NodeStatus::kRejoining) >= params_.max_nodes) {
    state = AdmitState::kRedundant;
  }
  if (state == AdmitState::kRedundant) {
    rec.status = NodeStatus::kRedundant;
  } else {
    MakeParticipant(rec, now);
  }
  nodes_.emplace(join.node, std::move(rec));
  out.push_back(Admitted{join.node, state, round_});
}

void RendezvousMachine::OnKeepAlive(const KeepAlive& keep_alive, TimePoint now, std::vector<Decision>& out) {
  auto it = nodes_.find(keep_alive.node);
  if (it == nodes_.end()) {
    out.push_back(Rejected{keep_alive.node, RejectCode::kUnknownNode,
                           "node " + ToString(keep_alive.node) +
                               " is not in the run (evicted, timed out or never joined): join again"});
    return;
  }
  if (it->second.incarnation != keep_alive.incarnation) {
    out.push_back(Rejected{keep_alive.node, RejectCode::kDuplicateNode,
                           "node " + ToString(keep_alive.node) +
                               " is held by another agent incarnation: this agent was replaced; exit"});
    return;
  }
  it->second.last_seen = now;
}

void RendezvousMachine::OnLeave(const Leave& leave, TimePoint now, std::vector<Decision>& out) {
  auto it = nodes_.find(leave.node);
  const bool held = it != nodes_.end() && it->second.incarnation == leave.incarnation;
  if (leave.reason == LeaveReason::kUnhealthy) {
    // Removed first, so the survivors' RestartRequested (or a spare's
    // promotion) comes before a Closed for the budget.
    if (held) RemoveNode(it, RestartReason::kNodeLeft, now, out);
    RecordUnhealthy(leave, out);
    return;
  }
  if (!held) return;
  NodeRecord& rec = it->second;
  switch (leave.reason) {
    case LeaveReason::kNormalExit:
      nodes_.erase(it);
      DoClose(out);
      return;
    case LeaveReason::kFailure:
      if (rec.status == NodeStatus::kMember) {
        rec.status = NodeStatus::kRejoining;
        rec.join_deadline = now + params_.join_timeout;
        BreakRound(RestartReason::kNodeLeft, leave.node, now, out);
      } else if (rec.status != NodeStatus::kRejoining) {
        nodes_.erase(it);
      }
      return;
    case LeaveReason::kSignal:
      RemoveNode(it, RestartReason::kNodeLeft, now, out);
      return;
    case LeaveReason::kUnhealthy:
      return;  // handled above
  }
}

void RendezvousMachine::RecordUnhealthy(const Leave& leave, std::vector<Decision>& out) {
  ++unhealthy_;
  unhealthy_nodes_.push_back(UnhealthyNode{leave.node, leave.report});
  if (unhealthy_nodes_.size() > kUnhealthyKept) unhealthy_nodes_.erase(unhealthy_nodes_.begin());
  const int budget = MaxUnhealthy(params_);
  if (unhealthy_ <= budget) return;
  budget_closed_ = std::to_string(unhealthy_) + " node" + (unhealthy_ == 1 ? "" : "s") +
                   " left the job as unhealthy, more than --max-unhealthy-nodes " + std::to_string(budget) +
                   " allows (last: node " + ToString(leave.node) +
                   (leave.report.empty() ? std::string() : ": " + leave.report) +
                   "); the job ends: repair or replace the nodes, then start it again";
  DoClose(out);
  if (Closed* closed = out.empty() ? nullptr : std::get_if<Closed>(&out.back())) {
    closed->unhealthy_budget_exceeded = true;
    closed->message = budget_closed_;
  }
}

void RendezvousMachine::DoClose(std::vector<Decision>& out) {
  if (closed_) return;
  closed_ = true;
  Closed closed{round_, {}};
  for (const auto& [id, rec] : nodes_) {
    closed.nodes.push_back(id);
    if (rec.status == NodeStatus::kMember) finishing_[id] = Finishing{rec.incarnation, rec.last_seen};
  }
  nodes_.clear();
  last_call_.reset();
  out.push_back(std::move(closed));
}

void RendezvousMachine::ApplyDeadlinesUntil(TimePoint now, std::vector<Decision>& out) {
  const Duration keep_alive_timeout = KeepAliveTimeout(params_);
  // Each pass consumes every deadline equal to `t`, so NextDeadline() grows.
  for (std::optional<TimePoint> t = NextDeadline(); t && *t <= now; t = NextDeadline()) {
    // All nodes that expire together go at once, so survivors get one
    // RestartRequested that names none of the dead.
    std::optional<NodeId> lost_member;
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      auto next = std::next(it);
      if (it->second.last_seen + keep_alive_timeout <= *t) {
        out.push_back(Evicted{it->first, "node " + ToString(it->first) + " sent no keep-alive for " +
                                             FormatSeconds(keep_alive_timeout) +
                                             ": evicted (check that its agent runs and reaches the endpoint)"});
        if (it->second.status == NodeStatus::kMember && !lost_member) lost_member = it->first;
        nodes_.erase(it);
      }
      it = next;
    }
    if (lost_member) BreakRound(RestartReason::kNodeLost, *lost_member, *t, out);
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      auto next = std::next(it);
      if (it->second.join_deadline && *it->second.join_deadline <= *t) {
        out.push_back(TimedOut{it->first, "node " + ToString(it->first) + " got no complete round within join_timeout " +
                                              FormatSeconds(params_.join_timeout) + " (round " +
                                              std::to_string(round_) + " has " +
                                              std::to_string(Count(NodeStatus::kParticipant)) + " of min " +
                                              std::to_string(params_.min_nodes) +
                                              " nodes): start more nodes or raise --rdzv-conf join_timeout"});
        nodes_.erase(it);
      }
      it = next;
    }
    Reconcile(*t, out);
  }
}

void RendezvousMachine::RemoveNode(NodeMap::iterator it, RestartReason reason, TimePoint now,
                                   std::vector<Decision>& out) {
  bool was_member = it->second.status == NodeStatus::kMember;
  NodeId id = it->first;
  nodes_.erase(it);
  if (was_member) BreakRound(reason, id, now, out);
}

void RendezvousMachine::BreakRound(RestartReason reason, const NodeId& cause, TimePoint now,
                                   std::vector<Decision>& out) {
  RestartRequested restart{round_, reason, cause, {}};
  for (auto& [id, rec] : nodes_) {
    if (rec.status != NodeStatus::kMember) continue;
    restart.nodes.push_back(id);
    rec.status = NodeStatus::kRejoining;
    rec.join_deadline = now + params_.join_timeout;
  }
  if (!restart.nodes.empty()) out.push_back(std::move(restart));
  ++round_;
  complete_ = false;
  reforming_ = true;
  members_.clear();
  last_call_.reset();
}

void RendezvousMachine::MakeParticipant(NodeRecord& record, TimePoint now) {
  record.status = NodeStatus::kParticipant;
  record.join_deadline = now + params_.join_timeout;
}

void RendezvousMachine::Reconcile(TimePoint now, std::vector<Decision>& out) {
  if (closed_ || complete_) return;
  while (Count(NodeStatus::kParticipant) + Count(NodeStatus::kRejoining) < params_.max_nodes) {
    NodeMap::iterator spare = nodes_.end();
    for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
      if (it->second.status == NodeStatus::kRedundant &&
          (spare == nodes_.end() || it->second.arrival < spare->second.arrival)) {
        spare = it;
      }
    }
    if (spare == nodes_.end()) break;
    MakeParticipant(spare->second, now);
    out.push_back(Admitted{spare->first, AdmitState::kParticipant, round_});
  }
  int participants = Count(NodeStatus::kParticipant);
  if (participants < params_.min_nodes) {
    last_call_.reset();
    return;
  }
  if (!last_call_) last_call_ = now + params_.last_call_timeout;
  // A round re-forming after a break completes as soon as every member that
  // was asked to rejoin is back: the nodes that caused the break are already
  // participants, and survivors of a node loss must not wait a last call.
  const bool regrouped = reforming_ && Count(NodeStatus::kRejoining) == 0;
  if (participants >= params_.max_nodes || regrouped || (LastCallArmed() && now >= *last_call_)) {
    CompleteRound(out);
  }
}

void RendezvousMachine::CompleteRound(std::vector<Decision>& out) {
  std::vector<RankCandidate> candidates;
  for (const auto& [id, rec] : nodes_) {
    if (rec.status == NodeStatus::kParticipant) candidates.push_back({id, rec.previous_rank, rec.hint_rank});
  }
  RankAssignment ranks = AssignGroupRanks(candidates);
  RoundComplete done{round_, {}, 0, ranks.hints_honoured, ranks.hint_note};
  for (int rank = 0; rank < static_cast<int>(ranks.by_rank.size()); ++rank) {
    NodeRecord& rec = nodes_.at(ranks.by_rank[rank]);
    rec.status = NodeStatus::kMember;
    rec.previous_rank = rank;
    rec.join_deadline.reset();
    done.members.push_back(Member{ranks.by_rank[rank], rank, rec.local_world_size, rec.addr,
                                          rec.master_port});
    done.world_size += rec.local_world_size;
  }
  complete_ = true;
  reforming_ = false;
  last_call_.reset();
  members_ = done.members;
  out.push_back(std::move(done));
}

int RendezvousMachine::Count(NodeStatus status) const {
  int n = 0;
  for (const auto& [id, rec] : nodes_) n += rec.status == status ? 1 : 0;
  return n;
}

bool RendezvousMachine::LastCallArmed() const {
  return !closed_ && !complete_ && last_call_.has_value() && Count(NodeStatus::kRejoining) == 0;
}

std::vector<NodeId> RendezvousMachine::NodesWith(NodeStatus status) const {
  std::vector<NodeId> ids;
  for (const auto& [id, rec] : nodes_) {
    if (rec.status == status) ids.push_back(id);
  }
  return ids;
}

// After close, members that are still running are only remembered until they
// leave or fall silent, so a host can wait for them before it stops serving.
void RendezvousMachine::StepFinishing(const Event& event, TimePoint now, std::vector<Decision>& out) {
  const Duration keep_alive_timeout = KeepAliveTimeout(params_);
  for (auto it = finishing_.begin(); it != finishing_.end();) {
    if (it->second.last_seen + keep_alive_timeout > now) {
      ++it;
      continue;
    }
    out.push_back(Evicted{it->first, "node " + ToString(it->first) + " sent no keep-alive for " +
                                         FormatSeconds(keep_alive_timeout) + " after the run closed"});
    it = finishing_.erase(it);
  }
  if (const KeepAlive* k = std::get_if<KeepAlive>(&event)) {
    auto it = finishing_.find(k->node);
    if (it != finishing_.end() && it->second.incarnation == k->incarnation) it->second.last_seen = now;
  }
  if (const Leave* l = std::get_if<Leave>(&event)) {
    auto it = finishing_.find(l->node);
    if (it != finishing_.end() && it->second.incarnation == l->incarnation) finishing_.erase(it);
  }
}

std::optional<TimePoint> RendezvousMachine::NextDeadline() const {
  std::optional<TimePoint> next;
  auto consider = [&next](TimePoint t) {
    if (!next || t < *next) next = t;
  };
  const Duration keep_alive_timeout = KeepAliveTimeout(params_);
  if (closed_) {
    for (const auto& [id, f] : finishing_) consider(f.last_seen + keep_alive_timeout);
    return next;
  }
  for (const auto& [id, rec] : nodes_) {
    consider(rec.last_seen + keep_alive_timeout);
    if (rec.join_deadline) consider(*rec.join_deadline);
  }
  if (LastCallArmed()) consider(*last_call_);
  return next;
}

Counts RendezvousMachine::Tally() const {
  Counts c;
  c.round = round_;
  c.complete = complete_;
  c.closed = closed_;
  c.min_nodes = params_.min_nodes;
  c.max_nodes = params_.max_nodes;
  for (const auto& [id, rec] : nodes_) {
    if (rec.status == NodeStatus::kParticipant) ++c.participants;
    if (rec.status == NodeStatus::kRejoining) ++c.rejoining;
    if (rec.status == NodeStatus::kRedundant) ++c.redundant;
  }
  c.members = static_cast<int>(members_.size());
  c.live_nodes = static_cast<int>(nodes_.size() + finishing_.size());
  c.last_call_deadline = last_call_;
  c.unhealthy = unhealthy_;
  c.max_unhealthy = MaxUnhealthy(params_);
  return c;
}

Snapshot RendezvousMachine::State() const {
  const Counts c = Tally();
  Snapshot s;
  s.round = c.round;
  s.complete = c.complete;
  s.closed = c.closed;
  s.min_nodes = c.min_nodes;
  s.max_nodes = c.max_nodes;
  s.live_nodes = c.live_nodes;
  s.last_call_deadline = c.last_call_deadline;
  s.unhealthy = c.unhealthy;
  s.max_unhealthy = c.max_unhealthy;
  s.unhealthy_nodes = unhealthy_nodes_;
  s.participants = NodesWith(NodeStatus::kParticipant);
  s.rejoining = NodesWith(NodeStatus::kRejoining);
  std::vector<std::pair<uint64_t, NodeId>> spares;
  for (const auto& [id, rec] : nodes_) {
    if (rec.status == NodeStatus::kRedundant) spares.emplace_back(rec.arrival, id);
  }
  std::sort(spares.begin(), spares.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [arrival, id] : spares) s.redundant.push_back(id);
  s.members = members_;
  return s;
}

std::optional<NodeStatus> RendezvousMachine::StatusOf(const NodeId& node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.status;
}

}  // namespace ctrun::rdzv
