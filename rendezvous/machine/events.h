// The vocabulary of the rendezvous machine: events in, decisions out.
//
// The gRPC shell maps each request to an Event, feeds it to
// RendezvousMachine::Step and maps each Decision to a reply or a push. All
// types are plain copyable data with value equality; no proto types here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "rendezvous/machine/node_order.h"
#include "rendezvous/machine/verdict_line.h"

namespace ctrun::rdzv {

// ---- Events ---------------------------------------------------------------

// A node asks to take part in the next round. Sent at the start of every
// rendezvous attempt (first start, and after stopping workers for a restart).
struct Join {
  NodeId node;
  uint64_t incarnation = 0;      // fixed per agent process start; tells a restarted agent apart
  std::optional<int> hint_rank;  // --node-rank, if the user gave one
  int local_world_size = 1;      // workers on this node (> 0; may differ between nodes)
  std::string addr;              // address to publish as MASTER_ADDR if this node is group rank 0
  int master_port = 0;           // free port on the node, MASTER_PORT if it is group rank 0
};

// "Still alive": sent every keep_alive_interval for as long as the agent lives.
struct KeepAlive {
  NodeId node;
  uint64_t incarnation = 0;
};

enum class LeaveReason {
  kNormalExit,  // the agent is exiting normally: closes the run, like torchrun's shutdown()
  // Its workers failed with no restarts left and the agent exits: closes the
  // run as kNormalExit does (torchrun's shutdown() after a failure), and
  // says so in the server's log.
  kFailedExit,
  kFailure,     // its workers failed; it will stop them and Join again
  kSignal,      // the agent got a signal and exits: scale down, the run stays open
  // Its health check failed (or a worker asked to exclude it): it stopped
  // its workers and exits. Like kSignal, and it counts against the run's
  // unhealthy-node budget (Params::max_unhealthy_nodes); over it, the run
  // closes (Closed::unhealthy_budget_exceeded).
  kUnhealthy,
};

struct Leave {
  NodeId node;
  uint64_t incarnation = 0;
  LeaveReason reason = LeaveReason::kFailure;
  std::string report{};  // kUnhealthy: why, with the check's last output lines
  std::optional<VerdictSummary> verdict{};  // kFailedExit: the verdict the node printed
};

// The job is over (an agent exits with success or error, not on a signal).
struct Close {};

// Time passed: the shell sends it when NextDeadline() is reached.
struct Tick {};

// The node's agent received a preemption notice (a signal with a deadline):
// every other node of the run is to be told, once per run. The shell checks
// the fields first (CheckPreempt, preempt.h); the machine ignores a Preempt
// that fails the check.
struct Preempt {
  NodeId node;
  uint64_t incarnation = 0;
  double remaining_s = 0;  // the budget left when it was sent, seconds
  std::string source;      // the signal's name: "SIGTERM", "SIGUSR1", ...
};

using Event = std::variant<Join, KeepAlive, Leave, Close, Tick, Preempt>;

// ---- Decisions ------------------------------------------------------------

enum class AdmitState {
  kParticipant,  // in the round being formed; wait for RoundComplete
  kWaiting,      // a round was running: it has been asked to restart, and you are in the next one
  kRedundant,    // the run is full: hot spare, no join timeout, promoted when a slot frees
};

// Reply to a Join (or a later change of a waiting node's state, e.g. a spare
// promoted to participant). `round` is the round the node waits for.
struct Admitted {
  NodeId node;
  AdmitState state = AdmitState::kParticipant;
  uint64_t round = 0;
  bool operator==(const Admitted&) const = default;
};

struct Member {
  NodeId node;
  int group_rank = 0;
  int local_world_size = 1;
  std::string addr;
  int master_port = 0;
  bool operator==(const Member&) const = default;
};

// A round is formed: send to every member. `members` is in group-rank order
// (members[i].group_rank == i); world_size is the sum of local_world_size.
struct RoundComplete {
  uint64_t round = 0;
  std::vector<Member> members;
  int world_size = 0;
  bool hints_honoured = false;  // group ranks are the --node-rank hints
  std::string hint_note;        // why given hints were ignored; empty otherwise
  // Set by the server, never by the machine: the server that sent the round
  // serves its workers' c10d store on its own port (rendezvous/grpc/net/port_mux.h).
  bool store_on_rendezvous_port = false;
  bool operator==(const RoundComplete&) const = default;
};

enum class RestartReason {
  kNodeJoinedWaitList,  // scale-up: a node is waiting; not the agent's failure
  kNodeLost,            // a member stopped sending keep-alives and was evicted
  kNodeLeft,            // a member left: it exits (a signal, a failed health check)
  kWorkersFailed,       // a member's workers failed: it stays in the run and joins again
};

// Push to `nodes` (members of round `round`): stop workers and Join again.
// `cause` is the node whose arrival, loss, departure or failed workers broke
// the round.
struct RestartRequested {
  uint64_t round = 0;
  RestartReason reason = RestartReason::kNodeLeft;
  NodeId cause;
  std::vector<NodeId> nodes;
  bool operator==(const RestartRequested&) const = default;
};

// A node was removed for missing keep-alives.
struct Evicted {
  NodeId node;
  std::string message;
  bool operator==(const Evicted&) const = default;
};

enum class RejectCode {
  kClosed,         // the run is closed: exit (a spare or waiting node exits 0)
  kDuplicateNode,  // another live incarnation holds this node id; may retry after the keep-alive timeout
  kUnknownNode,    // keep-alive from a node the run does not hold (evicted or never joined): Join again
  kInvalidJoin,    // a malformed Join (local_world_size <= 0, negative hint)
  kUnhealthyBudget,  // the run was closed: more nodes left unhealthy than --max-unhealthy-nodes
};

// Reply to a request the machine refused.
struct Rejected {
  NodeId node;
  RejectCode code = RejectCode::kClosed;
  std::string message;
  bool operator==(const Rejected&) const = default;
};

// join_timeout passed before a round including `node` completed; the node is
// removed and its pending Join fails.
struct TimedOut {
  NodeId node;
  std::string message;
  bool operator==(const TimedOut&) const = default;
};

// The run is closed. Push to `nodes` (every node the run held); open Joins
// among them fail with kClosed. Running members keep running.
struct Closed {
  uint64_t round = 0;
  std::vector<NodeId> nodes;
  // Closed because more nodes left unhealthy than the budget allows: every
  // node must end the job (exit code 5), running members included.
  bool unhealthy_budget_exceeded = false;
  std::string message{};  // with unhealthy_budget_exceeded: the count, the budget, the last report
  // Closed by a node that failed for good (Leave{kFailedExit}): running
  // nodes stop their workers (--kill-on-bad-exit) and print its verdict.
  bool failed_exit = false;
  std::optional<VerdictSummary> verdict{};
  bool operator==(const Closed&) const = default;
};

// The run's first preemption notice: push to `nodes` (every node the run
// holds but `from`, the sender; empty when it holds no other). Decided once
// per run; later Preempts are only counted (RendezvousMachine::Preempted).
struct PreemptNotice {
  NodeId from;
  double remaining_s = 0;
  std::string source;
  std::vector<NodeId> nodes;
  bool operator==(const PreemptNotice&) const = default;
};

using Decision =
    std::variant<Admitted, RoundComplete, RestartRequested, Evicted, Rejected, TimedOut, Closed, PreemptNotice>;

std::string_view Name(LeaveReason reason);
std::string_view Name(AdmitState state);
std::string_view Name(RestartReason reason);
std::string_view Name(RejectCode code);

// One line for logs and tests, e.g. "RoundComplete r1 [a b] ws=4",
// "RestartRequested r1 node_lost cause=c [a b]", "Admitted a participant r0",
// "PreemptNotice from=a SIGTERM 20s [b c]".
// A node list longer than `max_nodes` shows its first max_nodes ids and the
// count of the rest: "[a b ... +9998 more]" (the server's log: one line per
// round, not one id per member).
std::string Describe(const Decision& decision, size_t max_nodes = SIZE_MAX);

// The same decision as a plain sentence, for the info lines a user reads
// (Describe's terms stay for --log-level debug and the tests), e.g.
// "round 1 formed: 2 nodes (a, b), world size 4",
// "round 1 ends for a restart: node c was lost (2 nodes told)",
// "the run is closed after round 1 (2 nodes told)". Node lists are cut as
// Describe's are.
std::string Narrate(const Decision& decision, size_t max_nodes = SIZE_MAX);

// Why a node left, as a plain sentence for the server's info line ("its
// workers failed with no restarts left; the run is closed").
std::string_view Explain(LeaveReason reason);

// The Status a client returns for a refused Join/KeepAlive:
// kClosed -> Aborted, kDuplicateNode -> FailedPrecondition,
// kUnknownNode -> NotFound, kInvalidJoin -> InvalidArgument,
// kUnhealthyBudget -> ResourceExhausted; message kept.
Status ToStatus(const Rejected& rejected);

// DeadlineExceeded with the TimedOut message.
Status ToStatus(const TimedOut& timed_out);

}  // namespace ctrun::rdzv
