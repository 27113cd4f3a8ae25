// JoinStream: the server side of one Join call, a stream of Updates to one
// node. Outbox: the gRPC work a handler collects under the server's lock and
// does after releasing it.
//
// Updates are queued under the server's lock (Enqueue, RequestFinish) and
// written one at a time with no lock held (Kick and the completions). The
// stream carries serialized Updates (the service's Join is a raw method), so
// a round's RoundComplete is queued as bytes shared by every member's stream
// (round_push.h) instead of one copy per member.
//
// Join is served through gRPC's async API, on the server's completion
// queues (serve_queues.h; async_calls.h says why not a callback).
//
// Lifetime: Request makes a stream that waits for a call. Each stream has at
// most one write, one finish and one "done" operation outstanding, all on
// its queue, whose one thread takes their tags. Finish waits until no holder is
// left, so a stream that was held under the server's lock (a true Enqueue or
// RequestFinish) stays valid until the holder's Kick(). Once both the finish
// and the done operation are back, the stream reports its end to its
// StreamOwner and deletes itself.
//
// Thread model: thread-safe; its own mutex guards the queue.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_stream.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/server/async_calls.h"
#include "rendezvous/machine/node_order.h"

namespace ctrun::rdzv {

class JoinStream;

// What a JoinStream reports its end to. Must outlive every stream it owns.
class StreamOwner {
 public:
  // A Join call arrived on `stream`: its handler (on the stream's queue
  // thread). The handler identifies the stream, then ends it or hands it on.
  virtual void JoinArrived(JoinStream* stream) = 0;
  // `stream` ended and will be deleted when this returns. Called on a gRPC
  // thread with no lock of the stream held.
  virtual void StreamDone(JoinStream* stream) = 0;

 protected:
  ~StreamOwner() = default;
};

class JoinStream final {
 public:
  // Makes a stream, counted in `live` until it is deleted, and asks
  // `service` for the next Join call on `cq`; once one comes the stream
  // calls `again`, then owner->JoinArrived (never, if the server shuts down
  // first: the stream is then deleted). All of them must outlive the stream.
  static void Request(AsyncService* service, grpc::ServerCompletionQueue* cq, StreamOwner* owner,
                      const std::function<void()>* again, LiveCalls* live);

  // The call's context and request, for JoinArrived.
  grpc::ServerContext& context() { return ctx_; }
  const grpc::ByteBuffer& request() const { return request_; }

  // Names the stream, once, before anyone else sees it (JoinArrived).
  // `peer_ip`: the address the call came from (PeerIp; "" if unknown).
  void Identify(std::string run_id, NodeId node, uint64_t incarnation, std::string peer_ip) {
    run_id_ = std::move(run_id);
    node_ = std::move(node);
    incarnation_ = incarnation;
    peer_ip_ = std::move(peer_ip);
  }

  const std::string& run_id() const { return run_id_; }
  const NodeId& node() const { return node_; }
  uint64_t incarnation() const { return incarnation_; }
  const std::string& peer_ip() const { return peer_ip_; }

  // The client cancelled the call or its connection broke (its agent died,
  // or its host is gone) rather than the server ending the stream.
  bool client_gone() const;

  // Queues `update` (then ends the stream OK when `finish_after`). False,
  // and nothing queued, when the stream is already ending; true means the
  // caller holds the stream and must call Kick() once, with no lock held.
  bool Enqueue(const v1::Update& update, bool finish_after);
  // The same for an Update already serialized; `round`: the round of the
  // RoundComplete it holds, if it holds one (logged once written).
  bool EnqueueBytes(grpc::ByteBuffer update, std::optional<uint64_t> round, bool finish_after);

  // Ends the stream with `status` once the queue is written. Same contract
  // as Enqueue.
  bool RequestFinish(grpc::Status status);

  // Ends a stream nobody else knows about yet.
  void FinishNow(grpc::Status status);

  // Releases one hold and starts whatever is due. May end the stream: the
  // caller must not touch it afterwards.
  void Kick();

 private:
  JoinStream(StreamOwner* owner, const std::function<void()>* again, LiveCalls* live)
      : owner_(owner), again_(again), live_(live) {
    live_->Add();
  }
  ~JoinStream() { live_->Remove(); }

  struct Action {
    enum Kind { kNone, kWrite, kFinish } kind = kNone;
    const grpc::ByteBuffer* update = nullptr;
    grpc::Status status;
  };
  struct Queued {
    grpc::ByteBuffer bytes;
    std::optional<uint64_t> round;  // of the RoundComplete it holds
  };

  // The completions of the stream's operations (their tags below).
  void OnArrived(bool ok);
  void OnWriteDone(bool ok);
  // The call is over (the client went away, or the server's finish is
  // written): a cancelled call marks the client gone and finishes.
  void OnDone(bool ok);
  void OnFinished(bool ok);
  // Both the finish and the done operation are back: reports the end, deletes.
  void End();

  Action NextLocked();
  // The client cancelled, or a write to it failed: finish CANCELLED and
  // remember it went away, unless the server had already chosen the end.
  void MarkClientGoneLocked();
  void Perform(const Action& action);

  StreamOwner* const owner_;
  const std::function<void()>* const again_;
  LiveCalls* const live_;
  std::string run_id_;
  NodeId node_;
  uint64_t incarnation_ = 0;
  std::string peer_ip_;

  grpc::ServerContext ctx_;
  grpc::ByteBuffer request_;
  grpc::ServerAsyncWriter<grpc::ByteBuffer> writer_{&ctx_};
  CallTag<JoinStream> arrived_{this, &JoinStream::OnArrived};
  CallTag<JoinStream> written_{this, &JoinStream::OnWriteDone};
  CallTag<JoinStream> finished_tag_{this, &JoinStream::OnFinished};
  CallTag<JoinStream> done_{this, &JoinStream::OnDone};

  mutable std::mutex mu_;
  bool client_gone_ = false;
  std::deque<Queued> queue_;  // front is being written while writing_; deque keeps it in place
  bool writing_ = false;
  std::optional<grpc::Status> finish_;  // wanted after the queue drains
  bool finished_ = false;               // Finish called
  bool finish_back_ = false;            // its operation is back
  bool done_back_ = false;              // the done operation is back
  int holds_ = 0;
};

// Work collected under the server's lock, done after it is released.
struct Outbox {
  std::vector<JoinStream*> kicks;  // streams held by a true Enqueue/RequestFinish
  std::vector<std::string> logs;   // info lines (plain sentences)
  std::vector<std::string> debug_logs;  // debug lines (the machine's own terms)
  std::vector<std::function<void()>> calls;  // WhenDrained callbacks now due

  // Kicks the streams, logs the lines, then makes the calls, in that order;
  // leaves the outbox empty. Call with no lock held.
  void Flush();
};

}  // namespace ctrun::rdzv
