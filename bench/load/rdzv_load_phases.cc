// rdzv_load's phases (connect, storm, round, drop, the end), in Run's
// thread: see rdzv_load_driver.h and rdzv_load.cc.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "rdzv_load_driver.h"
#include "own_channel.h"

namespace rdzv_load {

template <class Pred>
bool Load::WaitFor(Pred done, const char* phase) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool ok = cv_.wait_until(lock, deadline_, [&] { return !error_.empty() || done(); });
  if (!ok && error_.empty()) error_ = std::string("timed out (--timeout-s) in phase ") + phase;
  return error_.empty();
}

void Load::SetParams() {
  const int n = o_.agents;
  params_.set_min_nodes(n - o_.drop);
  params_.set_max_nodes(n);
  params_.set_join_timeout_s(o_.timeout_s * 2);
  params_.set_last_call_timeout_s(o_.timeout_s * 2);
  params_.set_close_timeout_s(30);
  params_.set_keep_alive_interval_s(o_.keep_alive_s);
  params_.set_keep_alive_max_attempt(3);
  deadline_ = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                       std::chrono::duration<double>(o_.timeout_s));
}

// connect: every channel connected, each on a connection of its own.
bool Load::ConnectChannels() {
  const TimePoint t_start = SteadyClock::now();
  for (int c = 0; c < o_.channels; ++c) {
    channels_.push_back(bench_load::OwnChannel(o_.endpoint));
    stubs_.push_back(v1::Rendezvous::NewStub(channels_.back()));
    channels_.back()->GetState(true);
  }
  const auto connect_by = std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                                std::chrono::duration<double>(o_.timeout_s));
  for (auto& ch : channels_) {
    if (!ch->WaitForConnected(connect_by)) {
      std::fprintf(stderr, "rdzv_load: cannot connect to %s (is ctrund listening? is the fd limit high enough?)\n",
                   o_.endpoint.c_str());
      return false;
    }
  }
  times_.emplace_back("connect_s", Seconds(SteadyClock::now() - t_start));
  usage_.emplace_back("connected", ReadServer(o_.server_pid));
  return true;
}

void Load::MakeAgents() {
  for (int i = 0; i < o_.agents; ++i) {
    auto a = std::make_unique<Agent>();
    a->index = i;
    a->node.set_addr("10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) + "." +
                     std::to_string(i % 256));
    a->node.set_pid(getpid());
    a->incarnation = (static_cast<uint64_t>(getpid()) << 32) | static_cast<uint64_t>(i + 1);
    a->stub = stubs_[i % o_.channels].get();
    agents_.push_back(std::move(a));
  }
}

// storm: N-1 joins at once.
bool Load::Storm() {
  const int n = o_.agents;
  const TimePoint t_storm = SteadyClock::now();
  for (int i = 0; i + 1 < n; ++i) Join(*agents_[i]);
  const bool ok = WaitFor([&] { return admitted_ == n - 1; }, "storm");
  times_.emplace_back("storm_s", Seconds(SteadyClock::now() - t_storm));
  usage_.emplace_back("storm", ReadServer(o_.server_pid));
  return ok;
}

// round: the last join completes it.
bool Load::FirstRound(uint64_t& first_round) {
  const int n = o_.agents;
  const TimePoint t_last = SteadyClock::now();
  Join(*agents_[n - 1]);
  bool ok = WaitFor(
      [&] {
        for (size_t r = 0; r < rounds_seen_.size(); ++r) {
          if (rounds_seen_[r] == n) return first_round = r, true;
        }
        return false;
      },
      "round");
  TimePoint last = t_last;
  for (auto& a : agents_) last = std::max(last, a->round_at);
  times_.emplace_back("round_s", Seconds(last - t_last));
  usage_.emplace_back("round", ReadServer(o_.server_pid));
  if (ok) {
    const std::string bad = CheckRanks(first_round, n, "first round");
    if (!bad.empty()) Fail(bad), ok = false;
  }
  return ok;
}

// drop: every (N/drop)-th agent vanishes.
bool Load::Drop(uint64_t first_round) {
  const int n = o_.agents;
  const int step = n / o_.drop;
  const TimePoint t_drop = SteadyClock::now();
  for (int k = 0; k < o_.drop; ++k) {
    Agent& a = *agents_[k * step];
    a.keep_alive_on = false;
    std::lock_guard<std::mutex> lock(a.mu);
    a.dropped = true;
    for (JoinCall* call : a.calls) call->Cancel();
  }
  const int survivors = n - o_.drop;
  const uint64_t next = first_round + 1;
  bool ok = WaitFor([&] { return rounds_seen_.size() > next && rounds_seen_[next] == survivors; }, "drop");
  TimePoint last = t_drop;
  for (auto& a : agents_) {
    if (!a->dropped) last = std::max(last, a->round_at);
  }
  times_.emplace_back("drop_round_s", Seconds(last - t_drop));
  usage_.emplace_back("drop", ReadServer(o_.server_pid));
  if (ok) {
    const std::string bad = CheckRanks(next, survivors, "round after the drop");
    if (!bad.empty()) Fail(bad), ok = false;
  }
  return ok;
}

// The end: one survivor closes the run with NORMAL_EXIT.
bool Load::LeaveOne() {
  Agent& a = *agents_[o_.agents - 1];
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::LeaveRequest req;
  req.set_version(v1::PROTOCOL_VERSION_3);
  req.set_run_id(o_.run_id);
  *req.mutable_node() = a.node;
  req.set_incarnation(a.incarnation);
  req.set_reason(v1::LeaveRequest::NORMAL_EXIT);
  v1::LeaveReply rep;
  grpc::Status s = a.stub->Leave(&ctx, req, &rep);
  if (!s.ok()) {
    Fail("Leave: " + s.error_message());
    return false;
  }
  return true;
}

// Every stream cancelled; returns when every call has ended.
void Load::CancelAllAndWait() {
  for (auto& a : agents_) {
    std::lock_guard<std::mutex> lock(a->mu);
    for (JoinCall* call : a->calls) call->Cancel();
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return calls_ == 0; });
}

int Load::Run() {
  SetParams();
  if (!ConnectChannels()) return 1;
  MakeAgents();
  std::thread keep_alive([this] { KeepAliveLoop(); });

  uint64_t first_round = 0;
  bool ok = Storm();
  if (ok) ok = FirstRound(first_round);
  if (ok) ok = Drop(first_round);

  // The end: one survivor closes the run, then every stream is cancelled.
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  keep_alive.join();
  if (ok) ok = LeaveOne();
  CancelAllAndWait();
  Report(ok && error_.empty());
  return ok && error_.empty() ? 0 : 1;
}

}  // namespace rdzv_load
