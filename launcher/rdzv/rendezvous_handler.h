// RendezvousHandler: what the agent needs from a rendezvous, and nothing else.
//
// The agent asks for the next round, learns its place in it, and hears about
// membership changes while its workers run. Implementations: LocalRendezvous
// (one node); the multi-node gRPC client plugs in behind the same interface.
// Thread model: every call and callback happens on the agent's io_context.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "rendezvous/logs/log_sink.h"
#include "rendezvous/machine/events.h"
#include "rendezvous/machine/failure_record.h"
#include "rendezvous/machine/straggler.h"
#include "rendezvous/machine/verdict_line.h"

namespace ctrun::launcher {

// One completed round, as seen by this node.
struct Round {
  int round = 0;
  int group_rank = 0;
  std::vector<int> local_world_sizes;  // every node's nproc, in group-rank order
  std::string master_addr;             // where the workers' c10d store is hosted
  int master_port = 0;
  std::string run_id;
  bool use_agent_store = false;        // TORCHELASTIC_USE_AGENT_STORE
};

// Who hosts the workers' c10d store, as a rendezvous publishes it in rounds.
struct StoreHosting {
  // The agent of group rank 0 hosts it (TORCHELASTIC_USE_AGENT_STORE=True);
  // false: worker rank 0 hosts it on a free port chosen per round.
  bool agent_store = false;
  // The port this node's agent store listens on; nullopt when this node
  // hosts none. A rendezvous that picks the master port per round advertises
  // this one, so group rank 0's store is where the workers go.
  std::optional<int> port;
};

enum class ShutdownReason {
  kSucceeded,  // the job finished: close the rendezvous
  kFailed,     // the job failed for good: close the rendezvous
  kSignal,     // ctrun was signalled: leave, but do not close (peers may go on)
  // This node is unhealthy (its health check failed, or a worker asked to
  // exclude it): leave as unhealthy (SetUnhealthyReport says why), do not
  // close; the run counts it against --max-unhealthy-nodes.
  kUnhealthy,
};

// How a node leaves the rendezvous on each shutdown: kSucceeded and kFailed
// both close the run (as torchrun's shutdown() does), and say which it was.
inline rdzv::LeaveReason ToLeaveReason(ShutdownReason reason) {
  switch (reason) {
    case ShutdownReason::kSucceeded: return rdzv::LeaveReason::kNormalExit;
    case ShutdownReason::kFailed: return rdzv::LeaveReason::kFailedExit;
    case ShutdownReason::kSignal: return rdzv::LeaveReason::kSignal;
    case ShutdownReason::kUnhealthy: return rdzv::LeaveReason::kUnhealthy;
  }
  return rdzv::LeaveReason::kNormalExit;
}

// A preemption notice that travels between nodes through the rendezvous.
struct PreemptNotice {
  double remaining_s = 0;   // the budget left when it was sent (receivers set their deadline = now + remaining_s)
  std::string source;       // "SIGUSR1", "SIGTERM", ...: the signal the first node received
  std::string node;         // the addr of the node that received the signal (NodeId.addr)
};

class RendezvousHandler {
 public:
  // Called while workers run: `charged` is false for a scale-up (a node is
  // waiting to join), true when the round broke because a peer failed or was
  // lost and this node must re-join.
  using ChangeCallback = std::function<void(bool charged, const std::string& why)>;

  virtual ~RendezvousHandler() = default;

  // Joins the next round. `done` runs once with the round, or with
  // DeadlineExceeded (join timeout), Aborted (the run was closed) or
  // Unavailable (the rendezvous cannot be reached).
  // ResourceExhausted: the run was closed because more nodes left it as
  // unhealthy than --max-unhealthy-nodes allows (the job ends, exit 5).
  virtual void NextRound(std::function<void(Result<Round>)> done) = 0;

  // Registers the membership-change callback (replaces any earlier one).
  virtual void OnChange(ChangeCallback cb) = 0;

  // Ends this node's part; `done` runs when peers have been told.
  virtual void Shutdown(ShutdownReason reason, std::function<void()> done) = 0;

  // The report a Shutdown(kUnhealthy) leaves with: the failed check and its
  // last output lines. A rendezvous that keeps no such record ignores it.
  virtual void SetUnhealthyReport(const std::string& /*report*/) {}
  // Straggler detection (rendezvous/machine/straggler.h). `source` is asked
  // at every keep-alive for this node's step report (nullopt: none now);
  // `on_change` gets each flag or recovery of this node's ranks that the
  // rendezvous sends back. Replaces earlier ones. Rendezvous backends with
  // no server that sees every node (local, etcd) ignore it.
  using StepSource = std::function<std::optional<rdzv::StepReport>()>;
  using StragglerCallback = std::function<void(const rdzv::StragglerChange&)>;
  virtual void TrackSteps(StepSource /*source*/, StragglerCallback /*on_change*/) {}

  // Preemption (the local and etcd backends keep these no-ops). Sends this
  // node's notice to every other node of the run (best effort; returns at
  // once). A node never gets its own notice back, and gets a run's notice at
  // most once per agent process.
  virtual void SendPreemptNotice(const PreemptNotice& /*notice*/) {}
  // Registers the callback for notices from other nodes (replaces any
  // earlier one); on the agent's io_context.
  using PreemptCallback = std::function<void(const PreemptNotice&)>;
  virtual void OnPreemptNotice(PreemptCallback /*cb*/) {}

  // --share-logs: makes streams that carry this node's worker lines to the
  // rendezvous server (its token and TLS); null when the backend has no
  // server that keeps logs (local, etcd, static). The factory and its sinks
  // may be used from any one thread, and outlive this handler.
  virtual rdzv::LogSinkFactory LogSinks() { return nullptr; }

  // Failure reports (`ctrun status --why`; the local, static and etcd
  // backends keep this a no-op). This node's failed workers of one
  // attempt, sent once, before the agent restarts the group or exits:
  // best effort, returns at once; a Shutdown that follows waits for the
  // report (bounded) so that it reaches the server before the node leaves.
  struct FailureReport {
    int round = 0;                  // the rendezvous round the workers ran in
    std::string host;               // this node's host name
    std::vector<rdzv::WorkerFailureInfo> failures;
  };
  virtual void ReportFailures(const FailureReport& /*report*/) {}

  // The verdict (rendezvous/machine/verdict_line.h). This node's workers
  // failed for good, and `local` is its verdict on its own failures. `done`
  // gets the run's: `local` when it names a cause of this node's own (not a
  // lost connection, NCCL, an unknown exit or only workers its agent
  // stopped) or when there is no server that sees every node; else the
  // verdict of the node that failed first and closed the run with it (so
  // every node prints the same line), waited for up to kVerdictWait; without
  // one by then, the server's (asked once) when its reports name a cause,
  // else `local`. On the agent's io_context.
  static constexpr std::chrono::seconds kVerdictWait{2};
  virtual void ResolveVerdict(std::optional<rdzv::VerdictSummary> local,
                              std::function<void(std::optional<rdzv::VerdictSummary>)> done) {
    done(std::move(local));
  }
  // The verdict a Shutdown(kFailed) leaves with: the other nodes print it.
  virtual void SetFailureVerdict(const rdzv::VerdictSummary& /*verdict*/) {}
  // Another node failed for good and closed the run while this one was not
  // finished: `cb` gets its verdict (nullopt when it sent none), at most once,
  // on the agent's io_context. Backends with no server ignore it.
  using RunFailedCallback = std::function<void(const std::optional<rdzv::VerdictSummary>&)>;
  virtual void OnRunFailed(RunFailedCallback /*cb*/) {}
};

}  // namespace ctrun::launcher
