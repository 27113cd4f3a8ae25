// RendezvousMachine: the dynamic rendezvous of ONE run id, as a pure state
// machine. Events in, decisions out; no I/O, threads or clock reads.
//
// The gRPC server owns one machine per run id (see run_registry.h), feeds it
// every request as an Event with the current time, and turns each Decision
// into a reply or a push. After each Step it re-arms ONE timer for
// NextDeadline() and sends Tick{} when it fires.
//
// Thread model: not thread-safe; one owner serialises every call. Copyable
// (a copy is an independent machine in the same state).
//
// Semantics (docs/rendezvous.md has the diagram):
//  * A round is formed from participants. It completes at once when they
//    reach max_nodes; when they reach min_nodes a last-call deadline
//    (now + last_call_timeout) starts, and at it the round completes, unless
//    rejoining nodes (below) are still expected. Dropping below min_nodes
//    cancels the last call.
//  * A Join while a round runs breaks that round if there is room (the
//    members get RestartRequested{kNodeJoinedWaitList}, the joiner is
//    admitted as kWaiting into the next round at once); when the run is full
//    the joiner becomes a hot spare (kRedundant, no join timeout) and is
//    promoted, in arrival order, as soon as a slot frees.
//  * When a running round breaks (join, failure, signal exit, eviction),
//    the next round opens at once; the surviving members become "rejoining":
//    they keep their capacity and block completion until they Join again
//    (keeping their group rank) or are removed. Once every one of them is
//    back (or gone) and there are >= min_nodes participants, that round
//    completes at once, without a last call: a restart after a node loss or
//    a scale-up costs no last_call_timeout.
//  * Every Join sets a join deadline (now + join_timeout); a node not in a
//    complete round by then gets TimedOut and is removed. Rejoining nodes
//    get the same deadline from the moment their round broke.
//  * A node silent (no Join/KeepAlive) for keep_alive_interval x
//    keep_alive_max_attempt is Evicted; if it was a member of the running
//    round, the others get RestartRequested{kNodeLost}.
//  * Close{} or Leave{kNormalExit} closes the run for good: Closed{} to every
//    node, every later Join is Rejected{kClosed}. Leave{kSignal} never closes.
//    The members of the running round are still counted in live_nodes until
//    they leave or miss their keep-alives (NextDeadline covers that expiry),
//    so the agent hosting the server can wait for them before it stops.
//  * A deadline is reached when now >= deadline. Every Step first applies,
//    in time order, each deadline that is <= now (as a Tick at that instant
//    would have), then the event.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "rendezvous/machine/events.h"
#include "rendezvous/machine/node_order.h"
#include "rendezvous/machine/preempt.h"
#include "rendezvous/machine/rdzv_params.h"

namespace ctrun::rdzv {

enum class NodeStatus {
  kParticipant,  // in the round being formed
  kMember,       // in the complete, running round
  kRejoining,    // member of a round that was asked to restart; has not joined again yet
  kRedundant,    // hot spare: the run is full
};

std::string_view Name(NodeStatus status);

// A node that left the run as unhealthy (Leave{kUnhealthy}): who, and its
// report (the failed check and its last output lines).
struct UnhealthyNode {
  NodeId node;
  std::string report;
  bool operator==(const UnhealthyNode&) const = default;
};

// How many UnhealthyNode records a run keeps (the most recent ones); the
// count (Counts::unhealthy) covers every one.
inline constexpr size_t kUnhealthyKept = 16;

// Plain data for the status RPC and displays. "waiting for nodes: 3/4
// (min 2), last call in 12 s" is participants.size()/max_nodes (min_nodes),
// *last_call_deadline - now. torchrun's wait list has no lasting form here:
// a node that joins a running round is admitted into the next round at once
// (it shows in `participants` of round+1, the old members in `rejoining`).
struct Snapshot {
  uint64_t round = 0;       // the round being formed, or the running one when complete
  bool complete = false;
  bool closed = false;
  int min_nodes = 1;
  int max_nodes = 1;
  std::vector<NodeId> participants;  // forming round, NodeLess order; empty while complete
  std::vector<NodeId> rejoining;     // expected back before the forming round can complete
  std::vector<NodeId> redundant;     // hot spares, arrival order
  std::vector<Member> members;       // rank table of the running round; empty unless complete
  int live_nodes = 0;                // nodes the run holds, plus (once closed) members of the
                                     // last round that have not left or fallen silent yet
  std::optional<TimePoint> last_call_deadline;  // set while forming with >= min_nodes participants
  int unhealthy = 0;                  // nodes that left as unhealthy, ever
  int max_unhealthy = 0;              // the budget: the run closes once unhealthy exceeds it
  std::vector<UnhealthyNode> unhealthy_nodes;  // the most recent ones (kUnhealthyKept), oldest first

  bool operator==(const Snapshot&) const = default;
};

// The same facts as Snapshot as numbers only: no allocation, for status
// queries that many nodes make while they wait.
struct Counts {
  uint64_t round = 0;
  bool complete = false;
  bool closed = false;
  int min_nodes = 1;
  int max_nodes = 1;
  int participants = 0;
  int rejoining = 0;
  int redundant = 0;
  int members = 0;
  int live_nodes = 0;
  std::optional<TimePoint> last_call_deadline;
  int unhealthy = 0;      // nodes that left as unhealthy, ever
  int max_unhealthy = 0;  // MaxUnhealthy(params)
};

// Everything a machine holds, as plain data, so that a copy can be kept
// outside the process (ctrund --state-dir: rendezvous/persist/machine_snapshot.h).
// RendezvousMachine::Import(m.Export()) answers every later Step exactly as
// m would. Times are on the caller's steady clock.
struct MachineState {
  // What the machine keeps of one node the run holds (the id is its key).
  struct NodeRecord {
    uint64_t incarnation = 0;
    NodeStatus status = NodeStatus::kParticipant;
    std::optional<int> hint_rank;
    int local_world_size = 1;
    std::string addr;
    int master_port = 0;
    TimePoint last_seen;
    std::optional<TimePoint> join_deadline;  // participants and rejoining nodes
    std::optional<int> previous_rank;        // members and rejoining nodes
    uint64_t arrival = 0;                    // FIFO order of spares
    bool operator==(const NodeRecord&) const = default;
  };
  struct Node : NodeRecord {
    NodeId id;
    bool operator==(const Node&) const = default;
  };
  // What the machine keeps of a member of the last round of a closed run
  // that has not left yet (the id is its key).
  struct Finishing {
    uint64_t incarnation = 0;
    TimePoint last_seen;
    bool operator==(const Finishing&) const = default;
  };
  struct FinishingNode : Finishing {
    NodeId id;
    bool operator==(const FinishingNode&) const = default;
  };

  Params params;
  uint64_t round = 0;
  bool complete = false;
  bool reforming = false;  // the forming round follows a broken one
  bool closed = false;
  std::optional<TimePoint> last_call;
  std::vector<Member> members;  // rank table of the running round
  std::vector<Node> nodes;      // NodeLess order
  std::vector<FinishingNode> finishing;
  uint64_t next_arrival = 0;
  TimePoint latest_now;
  int unhealthy = 0;                         // nodes that left as unhealthy, ever
  std::vector<UnhealthyNode> unhealthy_nodes;  // the most recent kUnhealthyKept
  std::string budget_closed;                 // non-empty: closed for the unhealthy budget (why)
  std::optional<PreemptRecord> preempt;      // the run's first preemption notice, if it got one

  bool operator==(const MachineState&) const = default;
};

// Orders (key, node) pairs by key, then NodeIdLess (the machine's indexes).
template <class Key>
struct KeyThenNodeLess {
  bool operator()(const std::pair<Key, NodeId>& a, const std::pair<Key, NodeId>& b) const {
    if (a.first != b.first) return a.first < b.first;
    return NodeLess(a.second, b.second);
  }
};

class RendezvousMachine {
 public:
  // A machine in round 0, forming, empty. InvalidArgument from
  // ValidateParams when `params` is not valid.
  static Result<RendezvousMachine> Create(const Params& params);

  // Applies the deadlines <= now, then `event`, and returns what the shell
  // must send, in order. Never fails: a refused request yields Rejected.
  // `now` must not go backwards; an earlier value is taken as the latest seen.
  // Per event (besides deadline decisions):
  //  Join: Admitted (participant/waiting/redundant), maybe RestartRequested
  //    and RoundComplete; Rejected{kClosed} after close,
  //    {kDuplicateNode} when a live node with this id has another
  //    incarnation, {kInvalidJoin} for local_world_size <= 0 or a negative
  //    hint. A repeated Join of a waiting node is idempotent (same answer,
  //    join deadline kept); a Join from a member of the running round means
  //    it restarted its workers: the round breaks (kWorkersFailed to the others).
  //  KeepAlive: nothing; Rejected{kUnknownNode} for a node the run does not
  //    hold, {kDuplicateNode} for another incarnation; nothing after close.
  //  Leave: removes the node (kFailure from a member: it stays as rejoining,
  //    the others get kWorkersFailed); a member's leave breaks the round
  //    (kNodeLeft); kNormalExit also closes. Unknown
  //    nodes and other incarnations are ignored, except for kUnhealthy: that
  //    is counted (with its report) whoever sends it, even a node that never
  //    joined (its check failed before its first Join). Once the count
  //    exceeds MaxUnhealthy(params) the run closes with
  //    Closed{unhealthy_budget_exceeded}, and later Joins get
  //    Rejected{kUnhealthyBudget} instead of {kClosed}.
  //  Close: Closed{} once; later Closes do nothing.
  //  Tick: only deadline decisions.
  std::vector<Decision> Step(const Event& event, TimePoint now);

  // The earliest instant at which a Tick would change something (a
  // keep-alive expiry, a join deadline, or an armed last call); nullopt when
  // nothing is pending or the run is closed. O(1) while the run is open.
  std::optional<TimePoint> NextDeadline() const;

  // The run's facts in numbers (the sizes of State()'s lists), in O(1)
  // with no allocation.
  Counts Tally() const;
  // Tally()'s facts with the lists themselves: a copy of the state for display.
  Snapshot State() const;

  // The run's first preemption notice and the count of all; nullopt before one.
  const std::optional<PreemptRecord>& Preempted() const { return preempt_; }

  // Where `node` stands; nullopt if the run does not hold it (or is closed).
  std::optional<NodeStatus> StatusOf(const NodeId& node) const;

  const Params& params() const { return params_; }

  // The whole state, for persistence.
  MachineState Export() const;

  // A machine in exactly `state`. InvalidArgument ("rendezvous state: ...",
  // naming the broken rule) when the params are invalid, a node id repeats,
  // a local_world_size is below 1, or the state breaks the machine's
  // invariants (a complete round whose rank table is not its kMember nodes
  // in rank order, kMember nodes in a forming round, nodes in a closed run).
  static Result<RendezvousMachine> Import(const MachineState& state);

 private:
  using NodeRecord = MachineState::NodeRecord;
  using Finishing = MachineState::Finishing;
  using NodeMap = std::map<NodeId, NodeRecord, NodeIdLess>;

  explicit RendezvousMachine(const Params& params) : params_(params) {}

  // A Join: checked (CheckJoin), then a node the run holds joins again
  // (Rejoin) or a new node is admitted (Admit). TakeJoin writes what a Join
  // says about its node (hint, worker count, address, port, last seen) into
  // its record.
  void OnJoin(const Join& join, TimePoint now, std::vector<Decision>& out);
  std::optional<Rejected> CheckJoin(const Join& join) const;
  void Rejoin(NodeMap::iterator it, const Join& join, TimePoint now, std::vector<Decision>& out);
  void Admit(const Join& join, TimePoint now, std::vector<Decision>& out);
  static void TakeJoin(NodeRecord& rec, const Join& join, TimePoint now);
  void OnKeepAlive(const KeepAlive& keep_alive, TimePoint now, std::vector<Decision>& out);
  void OnLeave(const Leave& leave, TimePoint now, std::vector<Decision>& out);
  void DoClose(std::vector<Decision>& out);
  void RecordUnhealthy(const Leave& leave, std::vector<Decision>& out);
  void StepFinishing(const Event& event, TimePoint now, std::vector<Decision>& out);
  // preempt.cc.
  void OnPreempt(const Preempt& preempt, TimePoint now, std::vector<Decision>& out);

  void ApplyDeadlinesUntil(TimePoint now, std::vector<Decision>& out);
  void RemoveNode(NodeMap::iterator it, RestartReason reason, TimePoint now, std::vector<Decision>& out);
  void BreakRound(RestartReason reason, const NodeId& cause, TimePoint now, std::vector<Decision>& out);
  void Reconcile(TimePoint now, std::vector<Decision>& out);
  void CompleteRound(std::vector<Decision>& out);
  void MakeParticipant(NodeRecord& record, TimePoint now);

  int Count(NodeStatus status) const;
  bool LastCallArmed() const;
  std::vector<NodeId> NodesWith(NodeStatus status) const;

  // The indexes below (counts by status, keep-alive and join deadlines in
  // time order, spares in arrival order) make every Step O(log nodes) but
  // for the decisions it emits: no step scans the run. Every change to a
  // node's status, last_seen, join_deadline or arrival, and every insertion
  // or erasure, goes Unindex -> change -> Index: Mutate for a change,
  // Erase for an erasure; an insertion is indexed once inserted.
  void Index(const NodeId& id, const NodeRecord& rec);
  void Unindex(const NodeId& id, const NodeRecord& rec);
  // Unindexes *it, calls fn(it->second) (which changes that record only,
  // never nodes_), and indexes it again. Defined in machine.cc.
  template <class Fn>
  void Mutate(NodeMap::iterator it, Fn&& fn);
  // Unindexes *it and erases it.
  void Erase(NodeMap::iterator it);
  void ClearNodes();
  // Nodes whose time in `index` is <= t, in NodeIdLess order (the order the
  // decisions about them are emitted in).
  using TimeIndex = std::set<std::pair<TimePoint, NodeId>, KeyThenNodeLess<TimePoint>>;
  static std::vector<NodeId> DueBy(const TimeIndex& index, TimePoint t);

  Params params_;
  uint64_t round_ = 0;
  bool complete_ = false;
  bool reforming_ = false;  // the forming round follows a broken one
  bool closed_ = false;
  std::optional<TimePoint> last_call_;
  std::vector<Member> members_;  // valid while complete_
  NodeMap nodes_;
  // After close: members of the last round still running (they keep sending
  // keep-alives until they leave); Evicted when silent. Counted in live_nodes.
  std::map<NodeId, Finishing, NodeIdLess> finishing_;
  uint64_t next_arrival_ = 0;
  TimePoint latest_now_{};
  int unhealthy_ = 0;
  std::vector<UnhealthyNode> unhealthy_nodes_;  // the most recent kUnhealthyKept
  std::string budget_closed_;                   // non-empty: closed for the unhealthy budget
  std::optional<PreemptRecord> preempt_;        // the run's first preemption notice

  std::array<int, 4> count_{};           // nodes_ by NodeStatus
  TimeIndex by_last_seen_;               // (last_seen, id) of every node
  TimeIndex by_join_deadline_;           // (join_deadline, id) of the nodes that have one
  std::set<std::pair<uint64_t, NodeId>, KeyThenNodeLess<uint64_t>> spares_;  // (arrival, id) of the spares
};

}  // namespace ctrun::rdzv
