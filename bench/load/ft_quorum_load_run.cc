// ft_quorum_load's run: the steps, the churn and the end, in Run's thread
// (see ft_quorum_load_driver.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "ft_quorum_load_driver.h"

namespace ft_quorum_load {

int Load::Run() {
  bool ok = Connect() && OpenWatches();
  const double minutes = o_.steps * o_.step_s / 60;
  const double total = std::max<double>(o_.min_losses, std::round(o_.groups * o_.lose_per_min * minutes));
  losses_total_ = std::min(static_cast<int>(total), std::max(0, o_.steps - 1) * std::max(1, o_.groups / 4));
  TimePoint next = SteadyClock::now();
  for (int step = 0; ok && step <= o_.steps; ++step) {  // step 0: the first quorum, not measured
    std::this_thread::sleep_until(next);                // the step's pace (--step-s)
    next = SteadyClock::now() +
           std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(o_.step_s));
    ok = Step(step);
  }
  end_usage_ = bench_load::ReadServerUsage(o_.server_pid);
  CloseAll();
  StopQueues();
  ok = ok && error_.empty();
  Report(ok);
  return ok ? 0 : 1;
}

// Spread over steps 1..steps-1: step s loses floor(s L / (steps-1)) -
// floor((s-1) L / (steps-1)) of the L losses, picked by a fixed stride.
std::vector<int> Load::Leavers(int step) {
  std::vector<int> out;
  const int spread = o_.steps - 1;
  if (step < 1 || step > spread) return out;
  const int n = static_cast<int>(static_cast<int64_t>(step) * losses_total_ / spread -
                                 static_cast<int64_t>(step - 1) * losses_total_ / spread);
  for (int k = 0, tries = 0; static_cast<int>(out.size()) < n && tries < o_.groups; ++tries) {
    const int64_t pick = static_cast<int64_t>(step) * 7919 + static_cast<int64_t>(k++) * 104729;
    const int i = static_cast<int>(pick % o_.groups);
    const Group& g = groups_[i];
    if (g.in_flight || g.left_at >= step - 1 || std::count(out.begin(), out.end(), i)) continue;
    out.push_back(i);
  }
  return out;
}

void Load::Leave(Group& g, bool finished, int64_t finished_step) {
  v1::FtLeaveRequest req;
  req.set_version(v1::PROTOCOL_VERSION_3);
  req.set_run_id(o_.run_id);
  req.set_group(g.id);
  req.set_reason(finished ? "finished" : "the bench's churn");
  req.set_finished(finished);
  req.set_finished_step(finished_step);
  v1::FtLeaveReply reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(static_cast<int>(o_.timeout_s)));
  const grpc::Status status = g.stub->FtLeave(&ctx, req, &reply);
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    Fail("group " + g.id + ": FtLeave failed: " + status.error_message());
  }
}

bool Load::Step(int step) {
  const bench_load::ServerUsage before = bench_load::ReadServerUsage(o_.server_pid);
  const std::vector<int> leavers = Leavers(step);
  for (int i : leavers) Leave(groups_[i], false, 0);
  std::vector<Group*> rejoining, core;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i : leavers) {
      groups_[i].left_at = step;
      groups_[i].ballot = false;  // back next step with no ballot: a newcomer that heals
    }
    for (Group& g : groups_) {
      if (g.in_flight || g.left_at == step) continue;
      g.core = g.left_at != step - 1 || step == 0;
      (g.core ? core : rejoining).push_back(&g);
    }
    core_pending_ = static_cast<int>(core.size());
    losses_ += step > 0 ? static_cast<int>(leavers.size()) : 0;
  }
  // The groups coming back first: the quorum that forms once the others
  // asked includes them (a later newcomer waits for the next one).
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Group* g : rejoining) Send(*g);
    for (Group* g : core) Send(*g);
  }
  const TimePoint sent = SteadyClock::now();
  if (!WaitStep(step, sent)) return false;
  if (step == 0) return true;
  const bench_load::ServerUsage after = bench_load::ReadServerUsage(o_.server_pid);
  std::lock_guard<std::mutex> lock(mu_);
  latency_s_.push_back(Seconds(last_answer_ - sent));
  cpu_s_.push_back(after.cpu_s - before.cpu_s);
  rss_kib_.push_back(after.rss_kib);
  quorum_ids_.push_back(core.front()->quorum_id);
  return true;
}

// Every group leaves as finished (no loss pushed to the others), then the
// watches are cancelled and waited for.
void Load::CloseAll() {
  int64_t step = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    for (const Group& g : groups_) step = std::max(step, g.step);
  }
  for (Group& g : groups_) {
    if (g.watch) Leave(g, true, step);
  }
  for (Group& g : groups_) {
    if (g.watch) g.watch->Cancel();
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(o_.timeout_s), [&] {
    return WatchesDone() && std::none_of(groups_.begin(), groups_.end(), [](const Group& g) { return g.in_flight; });
  });
}

}  // namespace ft_quorum_load
