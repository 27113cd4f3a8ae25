// FtService: the server's fault-tolerance calls, FtSync, FtWatch and FtLeave
// (ft_runs.h has their semantics): the per-run state (FtRuns), the held
// FtSync calls and the open FtWatch streams by id (ft_streams.h), and the
// routing of FtRuns' output to them.
//
// Each call checks the token and version, steps FtRuns under the server's
// mutex, and does the gRPC work (answers, ends, pushes) after the lock is
// released (FtOutbox). While the server stops (`stopping`, read under the
// mutex), every call is refused UNAVAILABLE.
//
// Locking: the server's mutex `mu` guards all of it. The handlers and the
// FtCallOwner callbacks take it; the methods marked so require it (checked).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/clock.h"
#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/server/call_check.h"
#include "rendezvous/grpc/server/checked_mutex.h"
#include "rendezvous/grpc/server/ft_runs.h"
#include "rendezvous/grpc/server/ft_streams.h"
#include "rendezvous/grpc/server/ft_sync_call.h"
#include "rendezvous/grpc/server/ft_watch_stream.h"
#include "rendezvous/grpc/server/server_timer.h"

namespace ctrun::rdzv {

class FtService final : public FtCallOwner {
 public:
  // All four outlive this; `stopping` is guarded by `mu`.
  FtService(CheckedMutex& mu, CallCheck& check, const bool& stopping, ServerTimer& timer,
            FtRuns::Limits limits = FtRuns::Limits{})
      : mu_(mu), check_(check), stopping_(stopping), timer_(timer), runs_(limits) {}
  FtService(const FtService&) = delete;
  FtService& operator=(const FtService&) = delete;

  // FtLeave's handler (a callback method).
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context, const v1::FtLeaveRequest* request);

  // FtCallOwner: the handlers of FtSync and FtWatch (async methods, on the
  // server's queues); a held FtSync whose client went away is dropped; a
  // watch that ended on the client's side is its group lost.
  void FtSyncArrived(FtSyncCall* call) override;
  void FtSyncCancelled(FtSyncCall* call) override;
  void FtWatchArrived(FtWatchStream* stream) override;
  void FtWatchDone(FtWatchStream* stream) override;

  // Each requires mu.
  //
  // The earliest deadline of the ft runs (FtRuns::NextDeadline).
  std::optional<TimePoint> NextDeadline() const;
  // The timer's part: ticks the ft runs that are due (FtRuns::TickDue).
  void Tick(TimePoint now, FtOutbox& out);
  // Shutdown: ends every held FtSync and every FtWatch (UNAVAILABLE).
  void EndAll(FtOutbox& out);
  // A run's ft state for GetState (FtRuns::View).
  std::optional<FtRunView> View(const std::string& run_id) const;

 private:
  // Hands FtRuns' output to the reactors it names (taking each answered or
  // ended one out of calls_/watches_) and wakes the timer for an earlier
  // deadline. Requires mu.
  void Route(FtOutput& output, FtOutbox& out);

  CheckedMutex& mu_;
  CallCheck& check_;
  const bool& stopping_;
  ServerTimer& timer_;
  FtRuns runs_;                                 // guarded by mu_
  std::map<uint64_t, FtSyncCall*> calls_;       // held FtSync calls by id; guarded by mu_
  std::map<uint64_t, FtWatchStream*> watches_;  // open FtWatch streams by id; guarded by mu_
  uint64_t next_id_ = 1;                        // guarded by mu_
};

}  // namespace ctrun::rdzv
