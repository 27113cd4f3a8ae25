// FtWatchStream: the server side of one FtWatch call (ft_streams.h has the
// ownership rules), served through gRPC's async API.
//
// A stream the server registered sends its initial metadata (with
// kFtWatchOpenKey) before any event: the client knows from it that the
// server holds the watch (FtClient's on_open).
//
// Events are queued under the server's lock (Push, RequestFinish) and
// written with no lock held (Kick and the completions), as JoinStream does;
// a true Push or RequestFinish is a hold that keeps the stream alive until
// that caller's Kick(). The queue is bounded (kMaxFtWatchQueue): a client
// that does not read loses the oldest events (each one only tells it to
// abort the step in flight; the newest says as much as all of them).
//
// Lifetime: Request makes a stream that waits for a call; once one comes it
// calls `again`, then its owner's FtWatchArrived, which ends it (FinishNow)
// or names it (Hold), registers it and opens it (Open). Once both its
// finish and its "done" operation are back, it reports its end to the
// owner (FtWatchDone) and deletes itself, on its queue's thread.
//
// Thread model: thread-safe; its own mutex guards the queue.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_stream.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/server/async_calls.h"
#include "rendezvous/grpc/server/ft_streams.h"

namespace ctrun::rdzv {

inline constexpr size_t kMaxFtWatchQueue = 16;

class FtWatchStream final {
 public:
  // Asks `service` for the next FtWatch call on `cq` (ServeQueues::Request's
  // contract). `owner`, `service`, `cq`, `again` and `live` outlive it.
  static void Request(AsyncService* service, grpc::ServerCompletionQueue* cq, FtCallOwner* owner,
                      const std::function<void()>* again, LiveCalls* live);

  // For FtWatchArrived.
  grpc::ServerContext& context() { return ctx_; }
  const v1::FtWatchRequest& request() const { return request_; }

  // Names a stream the owner registers (FtWatchArrived, before anyone else
  // sees it).
  void Hold(uint64_t id) { id_ = id; }
  uint64_t id() const { return id_; }
  const std::string& run_id() const { return request_.run_id(); }
  const std::string& group() const { return request_.group(); }

  // Queues `event` (dropping the oldest queued one not being written when
  // kMaxFtWatchQueue are queued). False, and nothing queued, when the
  // stream is already ending; true means the caller holds the stream and
  // must call Kick() once, with no lock held.
  bool Push(v1::FtEvent event);
  // Ends the stream with `status` once the queue is written. Same contract.
  bool RequestFinish(grpc::Status status);
  // Ends a stream nobody else knows about.
  void FinishNow(grpc::Status status);
  // Sends the initial metadata (kFtWatchOpenKey), unless an event or the
  // end went first; call once after registering it, with no lock held.
  void Open();
  // Releases one hold and starts whatever is due; may end the stream.
  void Kick();

 private:
  FtWatchStream(FtCallOwner* owner, const std::function<void()>* again, LiveCalls* live)
      : owner_(owner), again_(again), live_(live) {
    live_->Add();
  }
  ~FtWatchStream() { live_->Remove(); }

  struct Action {
    enum Kind { kNone, kMetadata, kWrite, kFinish } kind = kNone;
    const v1::FtEvent* event = nullptr;
    grpc::Status status;
  };
  void OnArrived(bool ok);
  void OnMetadataSent(bool ok);
  void OnWriteDone(bool ok);
  void OnFinished(bool ok);
  // The call is over: finished, or its client went away (cancelled).
  void OnDone(bool ok);
  // Both the finish and the done operation are back: reports, deletes.
  void EndIfBack();
  // The client went away: end CANCELLED, unless an end was chosen already.
  void MarkGoneLocked();
  Action NextLocked();
  void Perform(const Action& action);

  FtCallOwner* const owner_;
  const std::function<void()>* const again_;
  LiveCalls* const live_;
  uint64_t id_ = 0;

  grpc::ServerContext ctx_;
  v1::FtWatchRequest request_;
  grpc::ServerAsyncWriter<v1::FtEvent> writer_{&ctx_};
  CallTag<FtWatchStream> arrived_{this, &FtWatchStream::OnArrived};
  CallTag<FtWatchStream> metadata_tag_{this, &FtWatchStream::OnMetadataSent};
  CallTag<FtWatchStream> written_{this, &FtWatchStream::OnWriteDone};
  CallTag<FtWatchStream> finished_tag_{this, &FtWatchStream::OnFinished};
  CallTag<FtWatchStream> done_{this, &FtWatchStream::OnDone};

  std::mutex mu_;
  std::deque<v1::FtEvent> queue_;  // front is being written while writing_
  bool writing_ = false;           // a write or the initial metadata in flight
  bool opened_ = false;            // Open() was called (the metadata is due)
  bool metadata_sent_ = false;
  std::optional<grpc::Status> finish_;
  bool finished_ = false;     // Finish called
  bool finish_back_ = false;  // its operation is back
  bool done_back_ = false;    // the done operation is back
  int holds_ = 0;
};

}  // namespace ctrun::rdzv
