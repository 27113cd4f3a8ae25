#include "rendezvous/machine/events.h"

#include <cstdio>

namespace ctrun::rdzv {
namespace {

// The ids of `shown`, the first of a list of `total` (the rest as a count).
std::string ShownIds(const std::vector<NodeId>& shown, size_t total) {
  std::string out = "[";
  for (size_t i = 0; i < shown.size(); ++i) {
    if (i) out += " ";
    out += ToString(shown[i]);
  }
  if (total > shown.size()) out += " ... +" + std::to_string(total - shown.size()) + " more";
  return out + "]";
}

std::string JoinIds(const std::vector<NodeId>& nodes, size_t max_nodes) {
  if (nodes.size() <= max_nodes) return ShownIds(nodes, nodes.size());
  return ShownIds(std::vector<NodeId>(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(max_nodes)),
                  nodes.size());
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

std::string_view Name(LeaveReason reason) {
  switch (reason) {
    case LeaveReason::kNormalExit: return "normal_exit";
    case LeaveReason::kFailedExit: return "failed_exit";
    case LeaveReason::kFailure: return "failure";
    case LeaveReason::kSignal: return "signal";
    case LeaveReason::kUnhealthy: return "unhealthy";
  }
  return "?";
}

std::string_view Explain(LeaveReason reason) {
  switch (reason) {
    case LeaveReason::kNormalExit: return "its workers finished; the run is closed";
    case LeaveReason::kFailedExit: return "its workers failed with no restarts left; the run is closed";
    case LeaveReason::kFailure: return "its workers failed; it will join again";
    case LeaveReason::kSignal: return "its agent was stopped by a signal";
    case LeaveReason::kUnhealthy: return "it is unhealthy";
  }
  return "?";
}

std::string_view Name(AdmitState state) {
  switch (state) {
    case AdmitState::kParticipant: return "participant";
    case AdmitState::kWaiting: return "waiting";
    case AdmitState::kRedundant: return "redundant";
  }
  return "?";
}

std::string_view Name(RestartReason reason) {
  switch (reason) {
    case RestartReason::kNodeJoinedWaitList: return "node_joined_wait_list";
    case RestartReason::kNodeLost: return "node_lost";
    case RestartReason::kNodeLeft: return "node_left";
    case RestartReason::kWorkersFailed: return "workers_failed";
  }
  return "?";
}

std::string_view Name(RejectCode code) {
  switch (code) {
    case RejectCode::kClosed: return "closed";
    case RejectCode::kDuplicateNode: return "duplicate_node";
    case RejectCode::kUnknownNode: return "unknown_node";
    case RejectCode::kInvalidJoin: return "invalid_join";
    case RejectCode::kUnhealthyBudget: return "unhealthy_budget";
  }
  return "?";
}

std::string Describe(const Decision& decision, size_t max_nodes) {
  return std::visit(
      Overloaded{
          [](const Admitted& d) {
            return "Admitted " + ToString(d.node) + " " + std::string(Name(d.state)) + " r" +
                   std::to_string(d.round);
          },
          [max_nodes](const RoundComplete& d) {
            std::vector<NodeId> nodes;
            for (size_t i = 0; i < d.members.size() && i < max_nodes; ++i) nodes.push_back(d.members[i].node);
            const std::string ids = ShownIds(nodes, d.members.size());
            return "RoundComplete r" + std::to_string(d.round) + " " + ids +
                   " ws=" + std::to_string(d.world_size) + (d.hints_honoured ? " hints" : "");
          },
          [max_nodes](const RestartRequested& d) {
            return "RestartRequested r" + std::to_string(d.round) + " " + std::string(Name(d.reason)) +
                   " cause=" + ToString(d.cause) + " " + JoinIds(d.nodes, max_nodes);
          },
          [](const Evicted& d) { return "Evicted " + ToString(d.node); },
          [](const Rejected& d) { return "Rejected " + ToString(d.node) + " " + std::string(Name(d.code)); },
          [](const TimedOut& d) { return "TimedOut " + ToString(d.node); },
          [max_nodes](const Closed& d) {
            return "Closed r" + std::to_string(d.round) + " " + JoinIds(d.nodes, max_nodes) +
                   (d.unhealthy_budget_exceeded ? " unhealthy_budget" : "");
          },
          [max_nodes](const PreemptNotice& d) {
            char budget[32];
            std::snprintf(budget, sizeof budget, "%gs", d.remaining_s);
            return "PreemptNotice from=" + ToString(d.from) + " " + d.source + " " + budget + " " +
                   JoinIds(d.nodes, max_nodes);
          },
      },
      decision);
}

namespace {

// "a, b, c" or "a, b and 9998 more": the ids of the first `max_nodes` of
// `items` (`id(item)` a NodeId), then the count of the rest. Reads no more
// than it shows: a round of 10,000 members is logged under the server's lock.
template <class T, class Id>
std::string ListIds(const std::vector<T>& items, size_t max_nodes, Id id) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_nodes; ++i) out += (i ? ", " : "") + ToString(id(items[i]));
  if (items.size() > max_nodes) out += " and " + std::to_string(items.size() - max_nodes) + " more";
  return out;
}

std::string Count(size_t n, std::string_view word) {
  return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

std::string WhyRestart(const RestartRequested& d) {
  const std::string node = "node " + ToString(d.cause);
  switch (d.reason) {
    case RestartReason::kNodeJoinedWaitList: return node + " is waiting to join";
    case RestartReason::kNodeLost: return node + " was lost (its connection or keep-alives stopped)";
    case RestartReason::kNodeLeft: return node + " left";
    case RestartReason::kWorkersFailed: return "the workers of " + node + " failed";
  }
  return node;
}

}  // namespace

std::string Narrate(const Decision& decision, size_t max_nodes) {
  return std::visit(
      Overloaded{
          [](const Admitted& d) {
            return "node " + ToString(d.node) +
                   (d.state == AdmitState::kParticipant ? " joined round " + std::to_string(d.round)
                    : d.state == AdmitState::kWaiting   ? " waits for the round after " + std::to_string(d.round)
                                                        : " waits as a spare (the run is full)");
          },
          [max_nodes](const RoundComplete& d) {
            return "round " + std::to_string(d.round) + " formed: " + Count(d.members.size(), "node") + " (" +
                   ListIds(d.members, max_nodes, [](const Member& m) { return m.node; }) +
                   "), world size " + std::to_string(d.world_size) +
                   (d.hints_honoured ? ", in the nodes' --node-rank order" : "");
          },
          [](const RestartRequested& d) {
            return "round " + std::to_string(d.round) + " ends for a restart: " + WhyRestart(d) + " (" +
                   Count(d.nodes.size(), "node") + " told)";
          },
          [](const Evicted& d) { return "node " + ToString(d.node) + " was removed from the run"; },
          [](const Rejected& d) { return "node " + ToString(d.node) + " was refused: " + d.message; },
          [](const TimedOut& d) { return "node " + ToString(d.node) + " gave up waiting for a round"; },
          [](const Closed& d) {
            return "the run is closed after round " + std::to_string(d.round) + " (" +
                   Count(d.nodes.size(), "node") + " told)" +
                   (d.unhealthy_budget_exceeded ? ": more nodes left as unhealthy than --max-unhealthy-nodes allows"
                                                : "");
          },
          [](const PreemptNotice& d) {
            char budget[32];
            std::snprintf(budget, sizeof budget, "%g", d.remaining_s);
            return "node " + ToString(d.from) + " has notice of preemption (" + d.source + ", " + budget +
                   " s left); " + Count(d.nodes.size(), "node") + " told";
          },
      },
      decision);
}

Status ToStatus(const Rejected& rejected) {
  switch (rejected.code) {
    case RejectCode::kClosed: return Status::Aborted(rejected.message);
    case RejectCode::kDuplicateNode: return Status::FailedPrecondition(rejected.message);
    case RejectCode::kUnknownNode: return Status::NotFound(rejected.message);
    case RejectCode::kInvalidJoin: return Status::InvalidArgument(rejected.message);
    case RejectCode::kUnhealthyBudget: return Status::ResourceExhausted(rejected.message);
  }
  return Status::Internal(rejected.message);
}

Status ToStatus(const TimedOut& timed_out) { return Status::DeadlineExceeded(timed_out.message); }

}  // namespace ctrun::rdzv
