// RunView: one run as `ctrun status` shows it: the machine's counts and one
// line per node (its state, group rank, workers, address, and how long ago
// the server last heard from it).
//
// Pure: built from a machine's exported state and the time of the request;
// carried in the GetState reply (proto/rendezvous.proto's NodeView).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "rendezvous/machine/failure_record.h"
#include "rendezvous/machine/machine.h"
#include "rendezvous/machine/node_order.h"
#include "rendezvous/machine/quorum.h"
#include "rendezvous/machine/straggler.h"

namespace ctrun::rdzv {

struct NodeView {
  NodeId node;
  // "member" (of the running round), "participant" (of the forming round),
  // "rejoining" (a member of a broken round, expected back), "spare" (the
  // run is full), "finishing" (the run is closed; still running its workers).
  std::string state;
  std::optional<int> group_rank;  // members (and rejoining nodes: their previous rank)
  int local_world_size = 0;       // 0 when unknown (finishing nodes)
  std::string addr;               // the MASTER_ADDR it would publish; "" when unknown
  double last_seen_s = 0;         // seconds since its last Join or keep-alive
  // Straggler detection (straggler.h): the median of its ranks' latest step
  // times (nullopt: none reported), and its ranks flagged now.
  std::optional<double> median_step_s;
  std::vector<int> straggler_ranks;

  bool operator==(const NodeView&) const = default;
};

// A fault-tolerant run's per-step quorum (--ft-replicas; step_sync.h), as
// `ctrun status` shows it.
struct FtRunView {
  int min_replicas = 0;
  int max_replicas = 0;
  std::optional<Quorum> quorum;       // the last one formed
  std::vector<std::string> groups;    // the groups the server counts: asked or watching, not lost
  std::vector<std::string> waiting;   // groups whose call for the next quorum is held
  std::string reason;                 // why the last decision did or did not form a quorum

  bool operator==(const FtRunView&) const = default;
};

struct RunView {
  // The run's id: set by the client from the server's reply (the one the
  // server picked for a query that named none).
  std::string run_id;
  // False when the server holds only the fault-tolerant quorum of this run
  // id (each replica group runs its own rendezvous): counts and nodes are
  // then empty.
  bool has_rendezvous = true;
  std::optional<FtRunView> ft;
  Counts counts;
  int world_size = 0;            // workers in the running round; 0 while forming
  std::vector<NodeView> nodes;   // members in group-rank order, then the others in NodeLess order
  std::vector<UnhealthyNode> unhealthy;  // nodes that left as unhealthy, the most recent ones
  // The failures the nodes reported (failure_record.h), earliest first: the
  // ones the server kept; failures_seen counts all.
  std::vector<ReportedFailure> failures;
  int64_t failures_seen = 0;
};

// The view of `state` at `now` (the machine's clock).
RunView ViewOf(const MachineState& state, const Counts& counts, TimePoint now);

// Fills the view's failures from `record` at `now`.
void AddFailures(const FailureRecord& record, TimePoint now, RunView& view);

// Fills each node's median step time and straggler ranks from `steps`.
void AddStepTimes(const StragglerDetector& steps, RunView& view);

}  // namespace ctrun::rdzv
