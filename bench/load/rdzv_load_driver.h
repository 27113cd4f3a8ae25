// rdzv_load's driver: Load, N simulated agents (Agent) against one ctrund,
// each with its own Join stream (JoinCall) and keep-alives, run through the
// phases connect, storm, round, drop (see rdzv_load.cc), then reported as
// one JSON object.
//
// Threads: Run's thread drives the phases; gRPC's callback threads deliver
// updates (OnUpdate) and stream ends (CallEnded); one keep-alive thread
// (KeepAliveLoop) sends keep-alives. Load's mu_ guards its counters, the
// rounds seen, error_ and stop_; each Agent's mu guards its calls and
// dropped. A JoinCall deletes itself when its stream ends.
//   rdzv_load_agent.cc   the streams, updates and keep-alives
//   rdzv_load_phases.cc  Run and its phases
//   rdzv_load_report.cc  the server's usage, the rank check, the report
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rdzv_load_options.h"
#include "rendezvous.grpc.pb.h"
#include "server_usage.h"

namespace rdzv_load {

namespace v1 = ::ctrun::rdzv::v1;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

inline double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// The server's CPU seconds (user + system) and memory, from /proc; -1 where
// unknown (no pid).
using ServerUsage = bench_load::ServerUsage;
inline ServerUsage ReadServer(long pid) { return bench_load::ReadServerUsage(pid); }

class Load;
class JoinCall;

// One simulated agent. Its Join stream and keep-alive are driven from
// gRPC's callback threads; `mu` guards `calls` and `dropped`.
struct Agent {
  int index = 0;
  v1::NodeId node;
  uint64_t incarnation = 0;
  v1::Rendezvous::Stub* stub = nullptr;
  std::mutex mu;
  // Its Join streams that have not ended: the newest, and older ones the
  // server has not ended yet (a new Join replaces the old stream on the
  // server's side). Dropping the agent cancels them all, as a killed
  // agent's closed connection would.
  std::vector<JoinCall*> calls;
  bool dropped = false;
  bool admitted = false;
  // Keep-alives (the keep-alive thread only, after `keep_alive_on`).
  std::atomic<bool> keep_alive_on{false};
  TimePoint next_keep_alive{};
  // The last RoundComplete: round, this agent's group rank, when it came.
  uint64_t round = UINT64_MAX;
  int rank = -1;
  TimePoint round_at{};
};

class JoinCall final : public grpc::ClientReadReactor<v1::Update> {
 public:
  JoinCall(Load* load, Agent* agent) : load_(load), agent_(agent) {}
  void Start(const v1::JoinRequest& request);
  void Cancel() { ctx_.TryCancel(); }
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  Load* load_;
  Agent* agent_;
  grpc::ClientContext ctx_;
  v1::JoinRequest request_;
  v1::Update update_;
};

class Load {
 public:
  explicit Load(Options o) : o_(std::move(o)) {}

  // Runs every phase and prints the report; the exit code (0 passed, 1 not).
  int Run();
  void OnUpdate(Agent& a, const v1::Update& u);
  // A Join stream ended: off its agent's list, its status checked.
  void CallEnded(Agent& a, JoinCall* call, const grpc::Status& status);
  // A call (Join stream or keep-alive) is gone, its objects freed: one fewer
  // in flight.
  void CallGone();

 private:
  // rdzv_load_agent.cc
  void Join(Agent& a);
  void Fail(const std::string& what);
  void OnAdmitted(Agent& a, TimePoint now);
  void OnRoundComplete(Agent& a, const v1::RoundComplete& rc, TimePoint now);
  bool Dropped(Agent& a);
  void KeepAliveLoop();
  void SendKeepAlive(Agent& a);
  // rdzv_load_phases.cc
  void SetParams();
  bool ConnectChannels();
  void MakeAgents();
  bool Storm();
  bool FirstRound(uint64_t& first_round);
  bool Drop(uint64_t first_round);
  bool LeaveOne();
  void CancelAllAndWait();
  // Waits until `done()` (checked under mu_) or the timeout; false on timeout or failure.
  template <class Pred>
  bool WaitFor(Pred done, const char* phase);
  // rdzv_load_report.cc
  std::string CheckRanks(uint64_t round, int expect, const char* which);
  void Report(bool ok);

  Options o_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Rendezvous::Stub>> stubs_;
  std::vector<std::unique_ptr<Agent>> agents_;
  v1::RunParams params_;

  std::mutex mu_;
  std::condition_variable cv_;
  int admitted_ = 0;
  std::vector<int> rounds_seen_;  // agents that got round r, by r (small)
  std::string error_;
  int calls_ = 0;  // Join streams and keep-alives in flight
  bool stop_ = false;

  std::atomic<long> keep_alives_{0};
  std::atomic<long> keep_alive_errors_{0};
  TimePoint deadline_{};
  std::vector<std::pair<std::string, double>> times_;
  std::vector<std::pair<std::string, ServerUsage>> usage_;
};

}  // namespace rdzv_load
