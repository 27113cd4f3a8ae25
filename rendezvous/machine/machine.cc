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
    if (const Preempt* e = std::get_if<Preempt>(&event)) OnPreempt(*e, now, out);
    StepFinishing(event, now, out);
    return out;
  }
  ApplyDeadlinesUntil(now, out);
  if (const Join* e = std::get_if<Join>(&event)) OnJoin(*e, now, out);
  if (const KeepAlive* e = std::get_if<KeepAlive>(&event)) OnKeepAlive(*e, now, out);
  if (const Leave* e = std::get_if<Leave>(&event)) OnLeave(*e, now, out);
  if (std::holds_alternative<Close>(event)) DoClose(out);
  if (const Preempt* e = std::get_if<Preempt>(&event)) OnPreempt(*e, now, out);
  Reconcile(now, out);
  return out;
}

template <class Fn>
void RendezvousMachine::Mutate(NodeMap::iterator it, Fn&& fn) {
  Unindex(it->first, it->second);
  std::forward<Fn>(fn)(it->second);
  Index(it->first, it->second);
}

void RendezvousMachine::Erase(NodeMap::iterator it) {
  Unindex(it->first, it->second);
  nodes_.erase(it);
}

void RendezvousMachine::OnJoin(const Join& join, TimePoint now, std::vector<Decision>& out) {
  if (std::optional<Rejected> rejected = CheckJoin(join)) {
    out.push_back(std::move(*rejected));
    return;
  }
  if (auto it = nodes_.find(join.node); it != nodes_.end()) {
    Rejoin(it, join, now, out);
  } else {
    Admit(join, now, out);
  }
}

std::optional<Rejected> RendezvousMachine::CheckJoin(const Join& join) const {
  const std::string who = "node " + ToString(join.node);
  if (join.local_world_size <= 0) {
    return Rejected{join.node, RejectCode::kInvalidJoin,
                    who + ": local_world_size " + std::to_string(join.local_world_size) +
                        " must be at least 1 (check --nproc-per-node)"};
  }
  if (join.hint_rank && *join.hint_rank < 0) {
    return Rejected{join.node, RejectCode::kInvalidJoin,
                    who + ": --node-rank " + std::to_string(*join.hint_rank) +
                        " must not be negative (give 0..nnodes-1, or leave it out)"};
  }
  auto it = nodes_.find(join.node);
  if (it != nodes_.end() && it->second.incarnation != join.incarnation) {
    return Rejected{join.node, RejectCode::kDuplicateNode,
                    who + " is already in the run as another live agent: give each agent a distinct "
                          "--local-addr, or retry after " +
                        FormatSeconds(KeepAliveTimeout(params_)) + " if the old agent died"};
  }
  return std::nullopt;
}

void RendezvousMachine::TakeJoin(NodeRecord& rec, const Join& join, TimePoint now) {
  rec.hint_rank = join.hint_rank;
  rec.local_world_size = join.local_world_size;
  rec.addr = join.addr;
  rec.master_port = join.master_port;
  rec.last_seen = now;
}

void RendezvousMachine::Rejoin(NodeMap::iterator it, const Join& join, TimePoint now, std::vector<Decision>& out) {
  AdmitState state = AdmitState::kParticipant;
  bool was_member = false;
  Mutate(it, [&](NodeRecord& rec) {
    TakeJoin(rec, join, now);
    switch (rec.status) {
      case NodeStatus::kParticipant:  // a repeated Join: its join deadline is kept
        break;
      case NodeStatus::kRedundant:
        state = AdmitState::kRedundant;
        break;
      case NodeStatus::kRejoining:
        MakeParticipant(rec, now);
        break;
      case NodeStatus::kMember:
        was_member = true;
        MakeParticipant(rec, now);
        break;
    }
  });
  // A member that joins again restarted its workers without a Leave: same
  // as Leave{kFailure} + Join. (BreakRound leaves this node alone: it is no
  // member any more.)
  if (was_member) BreakRound(RestartReason::kWorkersFailed, join.node, now, out);
  out.push_back(Admitted{join.node, state, round_});
}

void RendezvousMachine::Admit(const Join& join, TimePoint now, std::vector<Decision>& out) {
  NodeRecord rec;
  rec.incarnation = join.incarnation;
  TakeJoin(rec, join, now);
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
  auto inserted = nodes_.emplace(join.node, std::move(rec)).first;
  Index(inserted->first, inserted->second);
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
  Mutate(it, [now](NodeRecord& rec) { rec.last_seen = now; });
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
      Erase(it);
      DoClose(out);
      return;
    case LeaveReason::kFailedExit:
      Erase(it);
      DoClose(out);
      if (Closed* closed = out.empty() ? nullptr : std::get_if<Closed>(&out.back())) {
        closed->failed_exit = true;
        closed->verdict = leave.verdict;
      }
      return;
    case LeaveReason::kFailure:
      if (rec.status == NodeStatus::kMember) {
        Mutate(it, [&](NodeRecord& r) {
          r.status = NodeStatus::kRejoining;
          r.join_deadline = now + params_.join_timeout;
        });
        // BreakRound leaves this node alone: it is no member any more.
        BreakRound(RestartReason::kWorkersFailed, leave.node, now, out);
      } else if (rec.status != NodeStatus::kRejoining) {
        Erase(it);
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
  ClearNodes();
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
    for (const NodeId& id : DueBy(by_last_seen_, *t - keep_alive_timeout)) {
      auto it = nodes_.find(id);
      out.push_back(Evicted{it->first, "node " + ToString(it->first) + " sent no keep-alive for " +
                                           FormatSeconds(keep_alive_timeout) +
                                           ": evicted (check that its agent runs and reaches the endpoint)"});
      if (it->second.status == NodeStatus::kMember && !lost_member) lost_member = it->first;
      Erase(it);
    }
    if (lost_member) BreakRound(RestartReason::kNodeLost, *lost_member, *t, out);
    for (const NodeId& id : DueBy(by_join_deadline_, *t)) {
      out.push_back(TimedOut{id, "node " + ToString(id) + " got no complete round within join_timeout " +
                                     FormatSeconds(params_.join_timeout) + " (round " + std::to_string(round_) +
                                     " has " + std::to_string(Count(NodeStatus::kParticipant)) + " of min " +
                                     std::to_string(params_.min_nodes) +
                                     " nodes): start more nodes or raise --rdzv-conf join_timeout"});
      Erase(nodes_.find(id));
    }
    Reconcile(*t, out);
  }
}

void RendezvousMachine::RemoveNode(NodeMap::iterator it, RestartReason reason, TimePoint now,
                                   std::vector<Decision>& out) {
  bool was_member = it->second.status == NodeStatus::kMember;
  NodeId id = it->first;
  Erase(it);
  if (was_member) BreakRound(reason, id, now, out);
}

void RendezvousMachine::BreakRound(RestartReason reason, const NodeId& cause, TimePoint now,
                                   std::vector<Decision>& out) {
  RestartRequested restart{round_, reason, cause, {}};
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
    if (it->second.status != NodeStatus::kMember) continue;
    restart.nodes.push_back(it->first);
    Mutate(it, [&](NodeRecord& rec) {
      rec.status = NodeStatus::kRejoining;
      rec.join_deadline = now + params_.join_timeout;
    });
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
    if (spares_.empty()) break;
    NodeMap::iterator spare = nodes_.find(spares_.begin()->second);  // the earliest arrival
    Mutate(spare, [&](NodeRecord& rec) { MakeParticipant(rec, now); });
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
    auto it = nodes_.find(ranks.by_rank[rank]);
    Mutate(it, [rank](NodeRecord& r) {
      r.status = NodeStatus::kMember;
      r.previous_rank = rank;
      r.join_deadline.reset();
    });
    const NodeRecord& rec = it->second;
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

int RendezvousMachine::Count(NodeStatus status) const { return count_[static_cast<size_t>(status)]; }

void RendezvousMachine::Index(const NodeId& id, const NodeRecord& rec) {
  ++count_[static_cast<size_t>(rec.status)];
  by_last_seen_.emplace(rec.last_seen, id);
  if (rec.join_deadline) by_join_deadline_.emplace(*rec.join_deadline, id);
  if (rec.status == NodeStatus::kRedundant) spares_.emplace(rec.arrival, id);
}

void RendezvousMachine::Unindex(const NodeId& id, const NodeRecord& rec) {
  --count_[static_cast<size_t>(rec.status)];
  by_last_seen_.erase({rec.last_seen, id});
  if (rec.join_deadline) by_join_deadline_.erase({*rec.join_deadline, id});
  if (rec.status == NodeStatus::kRedundant) spares_.erase({rec.arrival, id});
}

void RendezvousMachine::ClearNodes() {
  nodes_.clear();
  count_ = {};
  by_last_seen_.clear();
  by_join_deadline_.clear();
  spares_.clear();
}

std::vector<NodeId> RendezvousMachine::DueBy(const TimeIndex& index, TimePoint t) {
  std::vector<NodeId> due;
  for (auto it = index.begin(); it != index.end() && it->first <= t; ++it) due.push_back(it->second);
  std::sort(due.begin(), due.end(), NodeIdLess{});
  return due;
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
  if (!by_last_seen_.empty()) consider(by_last_seen_.begin()->first + keep_alive_timeout);
  if (!by_join_deadline_.empty()) consider(by_join_deadline_.begin()->first);
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
  c.participants = Count(NodeStatus::kParticipant);
  c.rejoining = Count(NodeStatus::kRejoining);
  c.redundant = Count(NodeStatus::kRedundant);
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
  for (const auto& [arrival, id] : spares_) s.redundant.push_back(id);
  s.members = members_;
  return s;
}

std::optional<NodeStatus> RendezvousMachine::StatusOf(const NodeId& node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.status;
}

}  // namespace ctrun::rdzv
