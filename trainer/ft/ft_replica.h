// FtReplica: one worker's side of fault-tolerant training across replica
// groups (docs/fault-tolerance.md): its link to the agent (agent_link.h),
// its healing server (heal_server.h), the cross-replica ring of the current
// quorum and a spare listening ring for the next one (abortable_ring.h).
// No torch: the caller owns the model; it hands over flat gradients and
// state snapshots as bytes.
//
// The life of a step (the caller's loop):
//   1. plan = Join(committed_step)        first sync, no ballot
//   2. if plan.heal_state: load it (heal_state.h); its step is plan.max_step
//      (Join/Vote already fetched it and told the agent `healed`)
//   3. if plan.serve: Offer(snapshot of the state at plan.max_step)
//   4. train step plan.max_step: its samples follow from the step and
//      (plan.replica_rank, plan.replica_world) (step_share.h); average the
//      gradients within the group (DDP), then AllReduceMean(flat gradients)
//      across the groups; false: the step will be discarded
//   5. decision = Vote()                  sync with the ballot
//      decision.commit: apply the optimizer step (committed step + 1),
//      else discard the gradients and run the same step again;
//      plan = decision.next, back to 2.
// Every answer (Join's and Vote's) is applied before it is returned: when
// its quorum id is not the current ring's, the spare ring is made current
// (so an abort cuts its Connect short), configured (ring id = quorum id,
// rank = replica_rank, size = replica_world) and connected to the right
// neighbour, and a new spare listens (its port goes into the next sync);
// when it names healing sources, the state at max_step is fetched (a
// failure of every source fails the call: the worker exits and its group
// restarts) and the healed step is then trained and voted on like any
// other; an offer from the previous answer is withdrawn. A ring that fails
// to connect is kept, broken: the step's all-reduce fails, the vote is no,
// and the agent forms a new quorum.
//
// Stall times (step_pace.h): a steady step's all-reduce gives up after 2x
// the pace (the lower quartile of the recent steps) without progress, the
// first wait under a new quorum after 4x (at least 1 s), a step where a group heals after
// options.stall_timeout. A rank that reaches the all-reduce later than that
// after its plan (a stopped or slowed process) held its peers up: its
// ballot, a no, says so (`2`), and the quorum server benches its group.
//
// Threads: one owning thread makes every call. The link's reader thread
// calls the abort callback, which aborts the current ring (under a mutex,
// so the owning thread may swap rings meanwhile).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/result.h"
#include "trainer/comm/abortable_ring.h"
#include "trainer/ft/agent_link.h"
#include "trainer/ft/heal_server.h"
#include "trainer/ft/step_pace.h"

namespace ctrun::trainer::ft {

struct FtReplicaOptions {
  std::string socket_path;  // CTRUN_FT_SOCKET
  std::string host;         // CTRUN_FT_HOST: the rings and the healing server bind it
  int local_rank = 0;       // LOCAL_RANK: the ring of this local rank
  // The longest a ring wait or a healing transfer may make no progress.
  std::chrono::milliseconds stall_timeout{30000};
  // false: every ring wait uses stall_timeout and no step is late (a test
  // hook: CTRUN_FT_FIXED_STALL, ft_env.h).
  bool adaptive_stall = true;
  uint64_t max_heal_bytes = uint64_t{8} << 30;
  // The healing server's send hook (heal_server.h): the fault tests' `serve`.
  HealServer::SendHook heal_send_hook = nullptr;
};

// What the caller does next: the step to train and under which quorum.
struct FtPlan {
  int64_t quorum_id = 0;
  int replica_rank = 0;
  int replica_world = 1;
  int64_t max_step = 0;  // the step every member trains next
  std::optional<std::string> heal_state;  // load it before training
  bool serve = false;                     // Offer a snapshot before training
  // The run finished at this step before this group asked (its peers
  // trained to the end without it): nothing is left to train; stop.
  std::optional<int64_t> finished_step = std::nullopt;
};

struct FtDecision {
  std::optional<bool> commit;  // the decision on the ballot (nullopt: none counted)
  FtPlan next;
};

class FtReplica {
 public:
  // Listens (healing server, spare ring) and connects to the agent.
  // Unavailable when the agent's socket cannot be reached.
  static Result<std::unique_ptr<FtReplica>> Start(FtReplicaOptions options);
  ~FtReplica();
  FtReplica(const FtReplica&) = delete;
  FtReplica& operator=(const FtReplica&) = delete;

  // The first sync (no ballot) at `committed_step`; the first plan.
  Result<FtPlan> Join(int64_t committed_step);

  // Offers `state` (the caller's snapshot at the plan's max_step) to the
  // healers of the plan's quorum, until the next answer.
  void Offer(std::shared_ptr<const std::string> state);

  // Averages `count` floats at `data` over the quorum's groups (sum over the
  // ring, then / replica_world), in place. False when the ring failed or
  // was aborted (the buffer is then undefined and this step's ballot is
  // no); the reason is in last_failure().
  bool AllReduceMean(float* data, std::size_t count);
  // The exact sum of --ft-exact (exact_average.h): `count` int64s summed
  // (modulo 2^64) over the quorum's groups, in place. False as for
  // AllReduceMean.
  bool AllReduceSum(int64_t* data, std::size_t count);

  // Votes on the step of the last plan (yes when every AllReduceMean since
  // that plan succeeded, and `ok`), gets the decision and the next plan.
  Result<FtDecision> Vote(bool ok = true);

  // Tells the agent this worker finished training at its committed step
  // (its link closing is then no failure of its group, and the quorum server
  // learns the run is over); waits for the agent's acknowledgement. Call
  // once, after the last Vote.
  Status Finish();

  const Status& last_failure() const { return last_failure_; }

 private:
  explicit FtReplica(FtReplicaOptions options);
  Result<FtPlan> Sync(const ft_wire::SyncLine& line);
  Result<FtPlan> Apply(const AgentAnswer& answer);
  Status ListenSpare();
  Status UseQuorum(const ft_wire::QuorumLine& answer);
  Status Heal(const ft_wire::QuorumLine& answer, FtPlan& plan);
  void AbortRing() noexcept;
  // Records a ring failure: the step's ballot is no.
  void RingFailed(Status status);
  // Runs `reduce` on the current ring with this step's stall time; the
  // step's first call marks it late when it comes past that time.
  template <typename Reduce>
  bool RingCall(Reduce reduce);

  FtReplicaOptions options_;
  std::unique_ptr<AgentLink> link_;
  std::unique_ptr<HealServer> heal_server_;
  std::mutex ring_mu_;  // guards ring_ (the pointer) against AbortRing
  std::unique_ptr<AbortableRing> ring_;  // the current quorum's; null before the first
  std::optional<int64_t> ring_quorum_;
  std::unique_ptr<AbortableRing> spare_;
  FtPlan plan_;         // the last plan handed out
  int64_t committed_ = 0;
  bool step_ok_ = true;  // every AllReduceMean since the plan succeeded
  bool step_late_ = false;  // this step reached the all-reduce past the peers' stall time
  bool step_reduced_ = false;  // this step called the ring already
  StepPace pace_;
  bool steady_ = false;   // the plan's quorum is the last one's, and nobody heals
  bool healing_ = false;  // a group heals under the plan's quorum (this one, or one it serves)
  std::chrono::steady_clock::time_point planned_{};  // when the plan was handed out
  bool offered_ = false;
  Status last_failure_;
};

}  // namespace ctrun::trainer::ft
