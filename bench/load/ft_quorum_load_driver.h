// ft_quorum_load's driver: Load, N simulated replica groups against one
// ctrund's quorum (FtWatch, FtSync, FtLeave of proto/rendezvous.proto),
// stepped together; see ft_quorum_load.cc for what it measures.
//
// Threads: Run's thread opens the watches, sends each step's calls and the
// leaves, and waits. The calls use gRPC's async API over --queues
// completion queues, one thread each (Poll): group i's watch and FtSync
// calls are on queue i % queues, so a completion's bookkeeping in gRPC
// (which, in a build without NDEBUG, scans every operation outstanding on
// its queue) sees ~N/queues operations, not N. Those threads deliver the
// answers (OnAnswer) and the watches' events. Load's mu_ guards every
// Group, the counters and error_. A SyncCall or Watch is owned by its
// Group; the queues are drained before the Groups go.
//   ft_quorum_load_queues.cc  the queues, their threads, the watches' and calls' tags
//   ft_quorum_load_steps.cc   the waits, the calls sent and answered
//   ft_quorum_load_run.cc     the steps, the churn, the end
//   ft_quorum_load_report.cc  the JSON report
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous.grpc.pb.h"
#include "server_usage.h"

namespace ft_quorum_load {

namespace v1 = ::ctrun::rdzv::v1;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

inline double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Options {
  std::string endpoint;
  int groups = 256;
  int channels = 4;
  int queues = 8;              // completion queues, one thread each
  int steps = 30;              // measured steps, after the first quorum
  double step_s = 1.0;         // a step starts at most this often
  double lose_per_min = 0.01;  // the share of the groups lost (and back the next step) per minute
  int min_losses = 3;          // at least this many in the run
  int sources = 4;             // FtSyncRequest.compact_sources (0: the whole quorum)
  std::string run_id = "ft-quorum-load";
  double timeout_s = 120;  // the most one step (or opening the watches) may take
  // A step whose answers stop coming this long (after its last call and
  // its last answer) ends without the rest: the server benched them
  // (step_sync.h's hang time), and they are answered at a later quorum.
  double stall_s = 10;
  long server_pid = 0;
};

Options Parse(int argc, char** argv);

class Load;

// A tag on one of the Load's completion queues: the queue's thread calls
// Done with the operation's outcome.
class Op {
 public:
  virtual void Done(bool ok) = 0;

 protected:
  ~Op() = default;
};

struct Group;

// One FtSync in flight; Done hands its answer to Load::OnAnswer and touches
// nothing after (the Group may replace it at once).
struct SyncCall final : Op {
  SyncCall(Load* l, Group* g) : load(l), group(g) {}
  void Done(bool ok) override;

  Load* load;
  Group* group;
  grpc::ClientContext ctx;
  v1::FtSyncRequest request;
  v1::FtSyncReply reply;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::FtSyncReply>> reader;
};

// One group's FtWatch stream, read for its life (its events are counted):
// started, its initial metadata read (Load::OnWatchOpen), read to its end
// (Load::OnWatchEvent), finished (Load::OnWatchDone, the last it does).
class Watch final : public Op {
 public:
  explicit Watch(Load* load) : load_(load) {}
  void Start(v1::Rendezvous::Stub* stub, grpc::CompletionQueue* cq, const v1::FtWatchRequest& request);
  void Cancel() { ctx_.TryCancel(); }
  void Done(bool ok) override;

 private:
  enum class State { kStarting, kOpening, kReading, kFinishing };
  void Finish();

  Load* load_;
  State state_ = State::kStarting;
  grpc::ClientContext ctx_;
  v1::FtEvent event_;
  grpc::Status status_;
  std::unique_ptr<grpc::ClientAsyncReader<v1::FtEvent>> reader_;
};

struct Group {
  std::string id;
  v1::Rendezvous::Stub* stub = nullptr;
  grpc::CompletionQueue* cq = nullptr;  // its watch's and calls' queue
  std::unique_ptr<Watch> watch;
  std::unique_ptr<SyncCall> call;  // the last FtSync
  bool in_flight = false;
  bool core = false;       // its answer ends the step (not a group rejoining)
  bool ballot = false;     // it trained a step of quorum_id: it votes on it
  int64_t quorum_id = 0;
  int64_t step = 0;        // the step it trains (its committed step)
  int world = 0;
  int left_at = -1;        // the step it left at (it calls again the next one)
};

class Load {
 public:
  explicit Load(Options o) : o_(std::move(o)) {}
  ~Load() { StopQueues(); }
  // Runs and prints the report; the exit code (0 ok, 1 not).
  int Run();

  // The queues' threads.
  void OnAnswer(Group& g, const grpc::Status& status);
  void OnWatchOpen(bool ok);
  void OnWatchEvent();
  void OnWatchDone(const grpc::Status& status);

 private:
  // The queues and their threads (Poll); StopQueues cancels what is still
  // in flight, shuts them down, drains them and joins the threads.
  void StartQueues();
  void StopQueues();
  static void Poll(grpc::CompletionQueue* cq);
  bool Connect();
  bool OpenWatches();
  // One step: the leaves, the calls, the wait; false on failure.
  bool Step(int step);
  void Leave(Group& g, bool finished, int64_t finished_step);
  void Send(Group& g);
  // The groups that leave at `step` (none at the first).
  std::vector<int> Leavers(int step);
  void CloseAll();
  bool Wait(const char* what, int step, bool (Load::*done)() const);
  // Waits for the step's answers until they stall (--stall-s); the groups
  // not answered then stay in flight, no longer counted. False on failure.
  bool WaitStep(int step, TimePoint sent);
  bool WatchesOpen() const { return watches_open_ == o_.groups; }
  bool WatchesDone() const { return watches_done_ == watches_started_; }
  void Fail(const std::string& what);
  void Report(bool ok);

  Options o_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Rendezvous::Stub>> stubs_;
  std::vector<Group> groups_;
  std::vector<std::unique_ptr<grpc::CompletionQueue>> queues_;  // after groups_: drained before they go
  std::vector<std::thread> pollers_;
  v1::FtParams params_;
  int losses_total_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  int core_pending_ = 0;       // this step's calls not answered, rejoining groups' apart
  TimePoint last_answer_{};    // this step's last counted answer
  int watches_started_ = 0, watches_open_ = 0, watches_done_ = 0;
  bool closing_ = false;  // the groups leave: their held calls end ABORTED
  long events_ = 0;
  int min_world_ = 1 << 30, max_world_ = 0;
  std::string error_;

  // Per measured step.
  std::vector<double> latency_s_, send_s_, cpu_s_;
  std::vector<long> rss_kib_;
  std::vector<int64_t> quorum_ids_;
  int losses_ = 0;
  int held_back_ = 0;  // groups not answered by a step's stall
  bench_load::ServerUsage end_usage_;
};

}  // namespace ft_quorum_load
