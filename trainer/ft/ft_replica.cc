#include "trainer/ft/ft_replica.h"

#include <chrono>
#include <utility>

#include "trainer/ft/heal_fetch.h"

namespace ctrun::trainer::ft {

FtReplica::FtReplica(FtReplicaOptions options) : options_(std::move(options)), pace_(options_.stall_timeout) {}

FtReplica::~FtReplica() {
  link_.reset();  // joins the reader thread: no abort callback runs after this
}

Status FtReplica::Finish() { return link_->Done(options_.local_rank, committed_); }

Result<std::unique_ptr<FtReplica>> FtReplica::Start(FtReplicaOptions options) {
  std::unique_ptr<FtReplica> replica(new FtReplica(std::move(options)));
  auto server = HealServer::Listen(replica->options_.host, replica->options_.heal_send_hook);
  if (!server.ok()) return server.status();
  replica->heal_server_ = std::move(*server);
  CTRUN_RETURN_IF_ERROR(replica->ListenSpare());
  FtReplica* self = replica.get();
  auto link = AgentLink::Connect(replica->options_.socket_path, [self](const std::string&) { self->AbortRing(); });
  if (!link.ok()) return link.status();
  replica->link_ = std::move(*link);
  return replica;
}

Status FtReplica::ListenSpare() {
  RingOptions ring_options;
  ring_options.listen_host = options_.host;
  ring_options.stall_timeout = options_.stall_timeout;
  auto spare = AbortableRing::Listen(std::move(ring_options));
  if (!spare.ok()) return spare.status();
  spare_ = std::move(*spare);
  return Status::Ok();
}

void FtReplica::AbortRing() noexcept {
  std::lock_guard<std::mutex> lock(ring_mu_);
  if (ring_) ring_->Abort();
}

Result<FtPlan> FtReplica::Join(int64_t committed_step) {
  committed_ = committed_step;
  ft_wire::SyncLine line{.local_rank = options_.local_rank, .committed_step = committed_step,
                .ring_port = spare_->port(), .heal_port = heal_server_->port(), .ballot = std::nullopt};
  return Sync(line);
}

void FtReplica::Offer(std::shared_ptr<const std::string> state) {
  offered_ = true;
  heal_server_->Offer(plan_.quorum_id, plan_.max_step, std::move(state));
}

template <typename Reduce>
bool FtReplica::RingCall(Reduce reduce) {
  if (!step_ok_) return false;
  AbortableRing* ring = ring_.get();
  // What the peers wait at the ring for this step; coming later than that
  // since the plan is coming late (a step where a group heals is excused).
  const std::chrono::milliseconds wait = !options_.adaptive_stall ? options_.stall_timeout
                                         : healing_                ? pace_.Healing()
                                         : steady_                 ? pace_.Steady()
                                                                   : pace_.Changed();
  if (options_.adaptive_stall && !healing_ && !step_reduced_ && pace_.Pace() &&
      std::chrono::steady_clock::now() - planned_ > wait) {
    step_late_ = true;
  }
  step_reduced_ = true;
  if (ring != nullptr) ring->SetStallTimeout(wait);
  Status status = ring == nullptr ? Status::FailedPrecondition("no cross-replica ring yet") : reduce(*ring);
  if (!status.ok()) {
    RingFailed(std::move(status));
    return false;
  }
  return true;
}

bool FtReplica::AllReduceMean(float* data, std::size_t count) {
  if (!RingCall([&](AbortableRing& ring) { return ring.AllReduceSum(data, count); })) return false;
  const float world = static_cast<float>(plan_.replica_world);
  for (std::size_t i = 0; i < count; ++i) data[i] /= world;
  return true;
}

bool FtReplica::AllReduceSum(int64_t* data, std::size_t count) {
  return RingCall([&](AbortableRing& ring) { return ring.AllReduceSum(data, count); });
}

Result<FtDecision> FtReplica::Vote(bool ok) {
  ft_wire::SyncLine line{.local_rank = options_.local_rank, .committed_step = committed_,
                .ring_port = spare_->port(), .heal_port = heal_server_->port(),
                .ballot = ft_wire::Ballot{.quorum_id = plan_.quorum_id, .step = plan_.max_step, .ok = ok && step_ok_,
                                     .late = step_late_}};
  const int64_t voted_step = plan_.max_step;
  auto answer = link_->Sync(line);
  if (!answer.ok()) return answer.status();
  FtDecision decision;
  decision.commit = answer->quorum.commit;
  if (answer->quorum.commit.value_or(false)) {
    committed_ = voted_step + 1;
    if (steady_) pace_.Record(std::chrono::steady_clock::now() - planned_);
  }
  auto plan = Apply(*answer);
  if (!plan.ok()) return plan.status();
  decision.next = std::move(*plan);
  return decision;
}

Result<FtPlan> FtReplica::Sync(const ft_wire::SyncLine& line) {
  auto answer = link_->Sync(line);
  if (!answer.ok()) return answer.status();
  return Apply(*answer);
}

// Withdraws the last offer, moves to the answer's quorum and heals.
Result<FtPlan> FtReplica::Apply(const AgentAnswer& answer) {
  const ft_wire::QuorumLine& q = answer.quorum;
  if (offered_) heal_server_->Withdraw();
  offered_ = false;
  step_ok_ = true;
  step_late_ = false;
  step_reduced_ = false;
  steady_ = ring_quorum_ == q.quorum_id && q.heal_sources.empty() && !q.serve;
  healing_ = !q.heal_sources.empty() || q.serve;
  if (answer.finished_step) {
    plan_ = FtPlan{.quorum_id = 0, .replica_rank = 0, .replica_world = 1, .max_step = committed_,
                   .heal_state = std::nullopt, .serve = false, .finished_step = answer.finished_step};
    return plan_;
  }
  if (!ring_quorum_ || *ring_quorum_ != q.quorum_id) CTRUN_RETURN_IF_ERROR(UseQuorum(q));
  FtPlan plan{.quorum_id = q.quorum_id, .replica_rank = q.replica_rank,
              .replica_world = q.replica_world, .max_step = q.max_step,
              .heal_state = std::nullopt, .serve = q.serve};
  if (!q.heal_sources.empty()) {
    CTRUN_RETURN_IF_ERROR(Heal(q, plan));
  } else if (q.max_step != committed_) {
    return Status::FailedPrecondition("the agent says every member trains step " + std::to_string(q.max_step) +
                                      " but this worker has committed " + std::to_string(committed_) +
                                      " steps and was not told to heal");
  }
  plan_ = plan;
  planned_ = std::chrono::steady_clock::now();
  return plan;
}

// The spare ring becomes the quorum's ring (current before it connects, so
// the agent's abort cuts a Connect short); a new spare listens. A ring that
// cannot connect stays current, broken: the step's vote is no.
Status FtReplica::UseQuorum(const ft_wire::QuorumLine& answer) {
  std::unique_ptr<AbortableRing> old;
  {
    std::lock_guard<std::mutex> lock(ring_mu_);
    old = std::move(ring_);
    ring_ = std::move(spare_);
  }
  old.reset();  // closes the last quorum's sockets
  ring_quorum_ = answer.quorum_id;
  CTRUN_RETURN_IF_ERROR(ListenSpare());
  Status status = ring_->Configure(static_cast<uint64_t>(answer.quorum_id), answer.replica_rank,
                                   answer.replica_world);
  if (status.ok()) {
    ring_->SetStallTimeout(options_.adaptive_stall ? pace_.Changed() : options_.stall_timeout);
    status = ring_->Connect(answer.right_host.empty() ? options_.host : answer.right_host, answer.right_port);
  }
  if (!status.ok()) RingFailed(std::move(status));
  return Status::Ok();
}

void FtReplica::RingFailed(Status status) {
  last_failure_ = std::move(status);
  step_ok_ = false;
}

Status FtReplica::Heal(const ft_wire::QuorumLine& answer, FtPlan& plan) {
  FetchOptions fetch;
  fetch.stall_timeout = options_.stall_timeout;
  fetch.max_bytes = options_.max_heal_bytes;
  auto fetched = FetchHealState(answer.heal_sources, answer.quorum_id, answer.max_step, fetch);
  if (!fetched.ok()) return fetched.status();
  CTRUN_RETURN_IF_ERROR(link_->Healed(options_.local_rank, answer.max_step, fetched->source,
                                      fetched->state.size(), fetched->seconds));
  committed_ = answer.max_step;
  plan.heal_state = std::move(fetched->state);
  return Status::Ok();
}

}  // namespace ctrun::trainer::ft
