#include "rendezvous/machine/run_view.h"

#include <algorithm>
#include <chrono>

namespace ctrun::rdzv {

namespace {

std::string StateName(NodeStatus status) {
  switch (status) {
    case NodeStatus::kMember: return "member";
    case NodeStatus::kParticipant: return "participant";
    case NodeStatus::kRejoining: return "rejoining";
    case NodeStatus::kRedundant: return "spare";
  }
  return "unknown";
}

double SecondsSince(TimePoint then, TimePoint now) {
  return std::max(0.0, std::chrono::duration<double>(now - then).count());
}

}  // namespace

RunView ViewOf(const MachineState& state, const Counts& counts, TimePoint now) {
  RunView view;
  view.counts = counts;
  if (state.complete) {
    for (const Member& m : state.members) view.world_size += m.local_world_size;
  }
  std::vector<NodeView> members, others;
  for (const MachineState::Node& n : state.nodes) {
    NodeView v{n.id, StateName(n.status), n.previous_rank, n.local_world_size, n.addr, SecondsSince(n.last_seen, now), {}, {}};
    (n.status == NodeStatus::kMember ? members : others).push_back(std::move(v));
  }
  std::stable_sort(members.begin(), members.end(),
                   [](const NodeView& a, const NodeView& b) { return a.group_rank < b.group_rank; });
  for (const MachineState::FinishingNode& f : state.finishing) {
    NodeView v{f.id, "finishing", std::nullopt, 0, "", SecondsSince(f.last_seen, now), {}, {}};
    for (const Member& m : state.members) {
      if (m.node == f.id) {
        v.group_rank = m.group_rank;
        v.local_world_size = m.local_world_size;
        v.addr = m.addr;
      }
    }
    others.push_back(std::move(v));
  }
  view.nodes = std::move(members);
  for (NodeView& v : others) view.nodes.push_back(std::move(v));
  view.unhealthy = state.unhealthy_nodes;
  return view;
}

void AddFailures(const FailureRecord& record, TimePoint now, RunView& view) {
  view.failures = record.Kept(now);
  view.failures_seen = record.seen();
}

void AddStepTimes(const StragglerDetector& steps, RunView& view) {
  const std::vector<RankStepView> ranks = steps.Ranks();
  for (NodeView& v : view.nodes) {
    if (std::optional<Duration> median = steps.NodeMedian(v.node)) {
      v.median_step_s = std::chrono::duration<double>(*median).count();
    }
    for (const RankStepView& r : ranks) {
      if (r.straggler && r.node == v.node) v.straggler_ranks.push_back(r.rank);
    }
  }
}

}  // namespace ctrun::rdzv
