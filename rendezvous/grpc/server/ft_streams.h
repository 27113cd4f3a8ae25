// The server side of the fault-tolerance calls' gRPC objects (ft_runs.h has
// their semantics): FtSyncCall, one held FtSync (ft_sync_call.h);
// FtWatchStream, one open FtWatch (ft_watch_stream.h); FtCallOwner, what
// both report to; FtOutbox, the gRPC work collected under the server's lock
// and done after it is released.
//
// Both are served through gRPC's async API on the server's completion
// queues (serve_queues.h; async_calls.h says why not as callbacks).
//
// Ownership: each call object deletes itself once its finish and its "done"
// operation are back; the finish is made exactly once. The server keeps a
// pointer to each while it holds it (a map by id, under its lock) and
// removes it from there before it is finished: whoever removes it finishes
// it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::rdzv {

class FtSyncCall;
class FtWatchStream;

// What the call objects report to (the server). Must outlive every one.
// Each is called on the object's queue thread with no lock held.
class FtCallOwner {
 public:
  // An FtSync call arrived: the handler, which ends it or holds it.
  virtual void FtSyncArrived(FtSyncCall* call) = 0;
  // The held call's client went away.
  virtual void FtSyncCancelled(FtSyncCall* call) = 0;
  // An FtWatch call arrived: the handler, which ends it or registers it.
  virtual void FtWatchArrived(FtWatchStream* stream) = 0;
  // The stream ended and is deleted when this returns.
  virtual void FtWatchDone(FtWatchStream* stream) = 0;

 protected:
  ~FtCallOwner() = default;
};

grpc::Status ToGrpcStatus(const Status& status);

// Work collected under the server's lock, done after it is released.
struct FtOutbox {
  std::vector<std::pair<FtSyncCall*, SyncAnswer>> answers;
  std::vector<std::pair<FtSyncCall*, grpc::Status>> ends;
  std::vector<FtWatchStream*> kicks;  // held by a true Push/RequestFinish
  std::vector<std::string> logs;      // info lines

  // Logs, then answers, ends and kicks; leaves the outbox empty. Call with
  // no lock held.
  void Flush();
};

}  // namespace ctrun::rdzv
