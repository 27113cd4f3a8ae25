// rdzv_load's agents on the wire: their Join streams, the updates they get
// and their keep-alives, as the real agent does (launcher/rdzv/
// grpc_rendezvous.cc over rendezvous/grpc/client/client.cc). See rdzv_load_driver.h.
#include <algorithm>
#include <chrono>
#include <string>

#include "rdzv_load_driver.h"

namespace rdzv_load {

void JoinCall::Start(const v1::JoinRequest& request) {
  request_ = request;
  ctx_.set_wait_for_ready(true);
  agent_->stub->async()->Join(&ctx_, &request_, this);
  StartRead(&update_);
  StartCall();
}

void JoinCall::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows
  load_->OnUpdate(*agent_, update_);
  update_ = v1::Update();  // frees the round's 40 KB (at 10k) instead of keeping it per agent
  StartRead(&update_);
}

void JoinCall::OnDone(const grpc::Status& status) {
  Load* load = load_;
  load->CallEnded(*agent_, this, status);
  // Deleted before the count drops: once it reaches 0 the driver tears the
  // channels down (and then exits), and this call's ClientContext must be
  // gone by then. (The other order freed the context after its channel, a
  // heap corruption seen once in ~40 runs.)
  delete this;
  load->CallGone();
}

void Load::Fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.empty()) error_ = what;
  cv_.notify_all();
}

void Load::Join(Agent& a) {
  v1::JoinRequest req;
  req.set_version(v1::PROTOCOL_VERSION_3);
  req.set_run_id(o_.run_id);
  *req.mutable_node() = a.node;
  req.set_incarnation(a.incarnation);
  req.set_local_world_size(1);
  req.set_master_port(20000 + a.index % 10000);
  *req.mutable_params() = params_;
  auto* call = new JoinCall(this, &a);
  {
    // Checked where the drop cancels a.calls: an agent dropped while it was
    // answering a RestartRequested must not open a stream nobody cancels
    // (the server would wait for its keep-alives to run out). A call
    // cancelled between here and Start starts cancelled (ClientContext).
    std::lock_guard<std::mutex> lock(a.mu);
    if (a.dropped) {
      delete call;
      return;
    }
    a.calls.push_back(call);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
  }
  call->Start(req);
}

void Load::CallEnded(Agent& a, JoinCall* call, const grpc::Status& status) {
  bool dropped;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    a.calls.erase(std::remove(a.calls.begin(), a.calls.end(), call), a.calls.end());
    dropped = a.dropped;
  }
  std::lock_guard<std::mutex> lock(mu_);
  // The server ends a stream OK when a newer Join replaced it or the run
  // closed; anything else before the end is a failure.
  if (!status.ok() && !dropped && !stop_ && error_.empty()) {
    error_ = "agent " + std::to_string(a.index) + ": Join stream ended: " + status.error_message();
  }
  cv_.notify_all();
}

void Load::CallGone() {
  std::lock_guard<std::mutex> lock(mu_);
  --calls_;
  cv_.notify_all();
}

bool Load::Dropped(Agent& a) {
  std::lock_guard<std::mutex> lock(a.mu);
  return a.dropped;
}

void Load::OnAdmitted(Agent& a, TimePoint now) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    first = !a.admitted;
    a.admitted = true;
  }
  if (first) {
    // As the real agent: keep-alives from its first Join on, every interval.
    a.next_keep_alive = now + std::chrono::duration_cast<SteadyClock::duration>(
                                  std::chrono::duration<double>(o_.keep_alive_s));
    a.keep_alive_on = true;
    std::lock_guard<std::mutex> lock(mu_);
    if (++admitted_ == static_cast<int>(agents_.size()) - 1) cv_.notify_all();
  }
}

void Load::OnRoundComplete(Agent& a, const v1::RoundComplete& rc, TimePoint now) {
  int rank = -1;
  for (const v1::Member& m : rc.members()) {
    if (m.node().addr() == a.node.addr() && m.node().pid() == a.node.pid() &&
        m.node().local_id() == a.node.local_id()) {
      rank = m.group_rank();
    }
  }
  int64_t nodes = 0, workers = 0;
  for (int i = 0; i < rc.local_world_size_values_size() && i < rc.local_world_size_counts_size(); ++i) {
    nodes += rc.local_world_size_counts(i);
    workers += int64_t{rc.local_world_size_values(i)} * rc.local_world_size_counts(i);
  }
  if (rank < 0 || rank >= nodes || workers != rc.world_size() || rc.members_size() < 1 ||
      rc.members(0).group_rank() != 0) {
    Fail("agent " + std::to_string(a.index) + ": round " + std::to_string(rc.round()) +
         " is malformed (no own member, no rank 0, or world_size " + std::to_string(rc.world_size()) +
         " != " + std::to_string(workers) + " workers in the size list)");
    return;
  }
  a.round = rc.round();
  a.rank = rank;
  a.round_at = now;
  std::lock_guard<std::mutex> lock(mu_);
  if (rounds_seen_.size() <= rc.round()) rounds_seen_.resize(rc.round() + 1, 0);
  ++rounds_seen_[rc.round()];
  cv_.notify_all();
}

void Load::OnUpdate(Agent& a, const v1::Update& u) {
  const TimePoint now = SteadyClock::now();
  switch (u.kind_case()) {
    case v1::Update::kAdmitted:
      OnAdmitted(a, now);
      return;
    case v1::Update::kRoundComplete:
      OnRoundComplete(a, u.round_complete(), now);
      return;
    case v1::Update::kRestartRequested:
      // As the real agent after stopping its workers: a new Join stream;
      // the server ends the old one.
      if (!Dropped(a)) Join(a);
      return;
    case v1::Update::kClosed:
      return;
    default:
      if (!Dropped(a)) {
        std::string what = u.has_rejected() ? "rejected: " + u.rejected().message()
                           : u.has_timed_out() ? "timed out: " + u.timed_out().message()
                           : u.has_evicted()   ? "evicted: " + u.evicted().message()
                                               : "an unknown update";
        Fail("agent " + std::to_string(a.index) + ": " + what);
      }
      return;
  }
}

void Load::SendKeepAlive(Agent& a) {
  struct Call {
    grpc::ClientContext ctx;
    v1::KeepAliveRequest req;
    v1::KeepAliveReply rep;
  };
  auto* call = new Call;
  // As the real client: each keep-alive is bounded by the interval.
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             std::chrono::duration<double>(o_.keep_alive_s)));
  call->ctx.set_wait_for_ready(true);
  call->req.set_version(v1::PROTOCOL_VERSION_3);
  call->req.set_run_id(o_.run_id);
  *call->req.mutable_node() = a.node;
  call->req.set_incarnation(a.incarnation);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
  }
  a.stub->async()->KeepAlive(&call->ctx, &call->req, &call->rep, [this, call](grpc::Status s) {
    ++keep_alives_;
    if (!s.ok() || call->rep.has_rejected()) ++keep_alive_errors_;
    delete call;
    CallGone();
  });
}

void Load::KeepAliveLoop() {
  const auto interval =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(o_.keep_alive_s));
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stop_; })) return;
    }
    const TimePoint now = SteadyClock::now();
    for (auto& ap : agents_) {
      Agent& a = *ap;
      if (!a.keep_alive_on || now < a.next_keep_alive) continue;
      a.next_keep_alive += interval;
      SendKeepAlive(a);
    }
  }
}

}  // namespace rdzv_load
