// FtSyncCall: the server side of one FtSync call (ft_streams.h has the
// ownership rules), served through gRPC's async API.
//
// Lifetime: Request makes a call object that waits for a call. Once one
// comes it calls `again`, then its owner's FtSyncArrived, which either
// ends it (End) or names it (Hold) and keeps it until it is answered. A
// cancelled call (its client went away) is reported to the owner once
// (FtSyncCancelled). The object deletes itself once its finish and its
// "done" operation are both back, on its queue's thread.
//
// Thread model: Answer or End from any thread, once, with no lock held; the
// rest on the queue's thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <mutex>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/server/async_calls.h"
#include "rendezvous/grpc/server/ft_streams.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::rdzv {

class FtSyncCall final {
 public:
  // Asks `service` for the next FtSync call on `cq` (ServeQueues::Request's
  // contract). `owner`, `service`, `cq`, `again` and `live` outlive it.
  static void Request(AsyncService* service, grpc::ServerCompletionQueue* cq, FtCallOwner* owner,
                      const std::function<void()>* again, LiveCalls* live);

  // For FtSyncArrived.
  grpc::ServerContext& context() { return ctx_; }
  const v1::FtSyncRequest& request() const { return request_; }

  // Names a call the owner keeps (FtSyncArrived, before anyone else sees it).
  void Hold(uint64_t id) { id_ = id; }
  uint64_t id() const { return id_; }
  const std::string& run_id() const { return request_.run_id(); }
  const std::string& group() const { return request_.group(); }

  // Each finishes the call; call one of them once, with no lock held.
  // Answer sends the answer in the form the request asked for
  // (compact_sources).
  void Answer(const SyncAnswer& answer);
  void End(const grpc::Status& status);

 private:
  FtSyncCall(FtCallOwner* owner, const std::function<void()>* again, LiveCalls* live)
      : owner_(owner), again_(again), live_(live) {
    live_->Add();
  }
  ~FtSyncCall() { live_->Remove(); }

  void OnArrived(bool ok);
  void OnFinished(bool ok);
  // The call is over: answered, or its client went away (cancelled).
  void OnDone(bool ok);
  // Deletes the call if both its finish and its done operation are back.
  void EndIfBack();

  FtCallOwner* const owner_;
  const std::function<void()>* const again_;
  LiveCalls* const live_;
  uint64_t id_ = 0;

  grpc::ServerContext ctx_;
  v1::FtSyncRequest request_;
  v1::FtSyncReply reply_;
  grpc::ServerAsyncResponseWriter<v1::FtSyncReply> responder_{&ctx_};
  CallTag<FtSyncCall> arrived_{this, &FtSyncCall::OnArrived};
  CallTag<FtSyncCall> finished_tag_{this, &FtSyncCall::OnFinished};
  CallTag<FtSyncCall> done_{this, &FtSyncCall::OnDone};

  std::mutex mu_;
  bool finish_back_ = false;  // guarded by mu_
  bool done_back_ = false;    // guarded by mu_
};

}  // namespace ctrun::rdzv
