// ft_quorum_load's waits and calls, in Run's thread, and the answers and
// watch events, in the queues' threads: see ft_quorum_load_driver.h.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

#include "ft_quorum_load_driver.h"
#include "own_channel.h"

namespace ft_quorum_load {
namespace {

std::chrono::system_clock::time_point DeadlineIn(double s) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

void Load::Fail(const std::string& what) {
  if (error_.empty()) error_ = what;
  cv_.notify_all();
}

void Load::OnWatchOpen(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  // Not opened: the server refused it, and OnWatchDone says why.
  if (ok && ++watches_open_ == o_.groups) cv_.notify_all();
}

void Load::OnWatchEvent() {
  std::lock_guard<std::mutex> lock(mu_);
  ++events_;
}

void Load::OnWatchDone(const grpc::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED && !closing_) {
    Fail("a watch ended: " + status.error_message());
  } else if (!closing_) {
    Fail("a watch ended before the run did");
  }
  if (++watches_done_ == watches_started_) cv_.notify_all();
}

bool Load::Wait(const char* what, int step, bool (Load::*done)() const) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto until = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                              std::chrono::duration<double>(o_.timeout_s));
  if (!cv_.wait_until(lock, until, [&] { return !error_.empty() || (this->*done)(); })) {
    Fail(std::string("timed out (--timeout-s) waiting for ") + what + " at step " + std::to_string(step));
  }
  return error_.empty();
}

bool Load::WaitStep(int step, TimePoint sent) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
  };
  const TimePoint give_up = sent + seconds(o_.timeout_s);
  last_answer_ = sent;
  while (error_.empty() && core_pending_ > 0) {
    const TimePoint stall = last_answer_ + seconds(o_.stall_s);
    if (SteadyClock::now() >= give_up) {
      Fail("timed out (--timeout-s) waiting for the step's answers at step " + std::to_string(step));
    } else if (SteadyClock::now() >= stall) {
      for (Group& g : groups_) g.core = false;  // their answers come at a later quorum
      held_back_ += core_pending_;
      core_pending_ = 0;
    } else {
      cv_.wait_until(lock, std::min(stall, give_up));
    }
  }
  return error_.empty();
}

bool Load::Connect() {
  for (int c = 0; c < o_.channels; ++c) {
    channels_.push_back(bench_load::OwnChannel(o_.endpoint));
    stubs_.push_back(v1::Rendezvous::NewStub(channels_.back()));
  }
  for (auto& ch : channels_) {
    if (!ch->WaitForConnected(DeadlineIn(o_.timeout_s))) {
      std::fprintf(stderr, "ft_quorum_load: cannot connect to %s (is ctrund listening there?)\n", o_.endpoint.c_str());
      return false;
    }
  }
  StartQueues();
  params_.set_min_replicas(1);
  params_.set_max_replicas(o_.groups);
  params_.set_join_timeout_s(o_.timeout_s);
  params_.set_heartbeat_timeout_s(o_.timeout_s);
  groups_.resize(static_cast<size_t>(o_.groups));  // never resized again: the callbacks hold references
  for (int i = 0; i < o_.groups; ++i) {
    groups_[i].id = "g" + std::to_string(i);
    groups_[i].stub = stubs_[i % o_.channels].get();
    groups_[i].cq = queues_[static_cast<size_t>(i % o_.queues)].get();
  }
  return true;
}

bool Load::OpenWatches() {
  for (Group& g : groups_) {
    v1::FtWatchRequest req;
    req.set_version(v1::PROTOCOL_VERSION_3);
    req.set_run_id(o_.run_id);
    *req.mutable_params() = params_;
    req.set_group(g.id);
    g.watch = std::make_unique<Watch>(this);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++watches_started_;
    }
    g.watch->Start(g.stub, g.cq, req);
  }
  return Wait("the watches to open", 0, &Load::WatchesOpen);
}

void Load::Send(Group& g) {
  g.call = std::make_unique<SyncCall>(this, &g);
  v1::FtSyncRequest& req = g.call->request;
  req.set_version(v1::PROTOCOL_VERSION_3);
  req.set_run_id(o_.run_id);
  *req.mutable_params() = params_;
  req.set_group(g.id);
  req.set_committed_step(g.step);
  req.set_address("127.0.0.1|" + std::to_string(10000 + (&g - groups_.data()) % 50000) + "/1");
  if (g.ballot) {
    req.mutable_ballot()->set_quorum_id(g.quorum_id);
    req.mutable_ballot()->set_step(g.step);
    req.mutable_ballot()->set_ok(true);
    req.mutable_ballot()->set_world(g.world);
  }
  req.set_parts(1);
  req.set_compact_sources(static_cast<uint32_t>(o_.sources));
  g.in_flight = true;
  SyncCall* call = g.call.get();
  call->reader = g.stub->PrepareAsyncFtSync(&call->ctx, call->request, g.cq);
  call->reader->StartCall();
  call->reader->Finish(&call->reply, &call->status, call);
}

void Load::OnAnswer(Group& g, const grpc::Status& status) {
  const TimePoint now = SteadyClock::now();
  std::lock_guard<std::mutex> lock(mu_);
  g.in_flight = false;
  if (!status.ok()) {
    if (!closing_) Fail("group " + g.id + ": FtSync failed: " + status.error_message());
  } else {
    const v1::FtSyncReply& r = g.call->reply;
    if (o_.sources > 0) {
      const v1::FtCompact& c = r.compact();
      if (c.world() <= 0 || c.rank() < 0 || c.rank() >= c.world() || r.members_size() != 0) {
        Fail("group " + g.id + ": the compact answer has rank " + std::to_string(c.rank()) + " of " +
             std::to_string(c.world()) + " and " + std::to_string(r.members_size()) + " members");
      }
      g.step = c.max_step();
      g.world = c.world();
    } else {  // the whole quorum (--sources 0: what a server older than the compact answer sends)
      g.step = 0;
      for (const v1::FtMember& m : r.members()) g.step = std::max(g.step, m.step());
      g.world = r.members_size();
      if (g.world == 0) Fail("group " + g.id + ": an answer with no members");
    }
    g.quorum_id = r.quorum_id();
    g.ballot = true;
    min_world_ = std::min(min_world_, g.world);
    max_world_ = std::max(max_world_, g.world);
  }
  if (g.core) {
    g.core = false;
    last_answer_ = now;
    if (--core_pending_ == 0) cv_.notify_all();
  }
  if (closing_) cv_.notify_all();
}

}  // namespace ft_quorum_load
