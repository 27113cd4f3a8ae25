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
// Join is served through gRPC's async API, on the completion queues of
// join_queues.h, not as a callback method: every callback call of a process
// shares gRPC's one process-wide callback queue (Debian's libgrpc polls with
// epoll1, which cannot run it in the background), and that libgrpc, built
// without NDEBUG, looks each completion up in a list of its queue's
// outstanding operations, one per open Join stream: O(N) per completion,
// O(N^2) per round. Spread over JoinQueues::kQueues queues, a completion
// scans about N/kQueues.
//
// Lifetime: Request makes a stream that waits for a call. Each stream has at
// most one write, one finish and one "done" operation outstanding, all on
// its queue, whose one thread calls OnTag. Finish waits until no holder is
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

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/machine/node_order.h"

namespace ctrun::rdzv {

class JoinStream;

// What a JoinStream reports its end to. Must outlive every stream it owns.
class StreamOwner {
 public:
  // `stream` ended and will be deleted when this returns. Called on a gRPC
  // thread with no lock of the stream held.
  virtual void StreamDone(JoinStream* stream) = 0;

 protected:
  ~StreamOwner() = default;
};

// The streams alive (requested or open), so that their queues are shut
// down only once none is left: an operation started on a queue after its
// shutdown is a fatal error in gRPC.
class LiveStreams {
 public:
  void Add();
  void Remove();
  // Blocks until no stream is left.
  void WaitNone();

 private:
  std::mutex mu_;
  std::condition_variable none_;
  int n_ = 0;
};

// The service with Join as a raw async method and every other method a
// callback: CallbackService without its callback Join (gRPC keeps a callback
// handler that a later "raw" mark would leave in place). A method added to
// the proto must be added here too: its callback override in the server then
// compiles.
using JoinService = v1::Rendezvous::WithRawMethod_Join<v1::Rendezvous::WithCallbackMethod_KeepAlive<
    v1::Rendezvous::WithCallbackMethod_Leave<v1::Rendezvous::WithCallbackMethod_GetState<
        v1::Rendezvous::WithCallbackMethod_Preempt<v1::Rendezvous::WithCallbackMethod_ReportFailure<
            v1::Rendezvous::WithCallbackMethod_ShipLogs<v1::Rendezvous::WithCallbackMethod_ReadLogs<
                v1::Rendezvous::WithCallbackMethod_FtSync<v1::Rendezvous::WithCallbackMethod_FtWatch<
                    v1::Rendezvous::WithCallbackMethod_FtLeave<v1::Rendezvous::Service>>>>>>>>>>>;

class JoinStream final {
 public:
  // Called on the stream's queue thread when a Join call arrives on it.
  using Arrival = std::function<void(JoinStream*)>;

  // Makes a stream, counted in `live` until it is deleted, and asks
  // `service` for the next Join call on `cq`; `arrival` is called with it
  // once one comes (never, if the server shuts down first: the stream is then
  // deleted). `owner`, `service`, `cq`, `arrival` and `live` must outlive the
  // stream.
  static void Request(JoinService* service, grpc::ServerCompletionQueue* cq, StreamOwner* owner,
                      const Arrival* arrival, LiveStreams* live);

  // The completion of one of this stream's operations, with gRPC's `ok`:
  // what the queue's thread calls with each tag it takes (a Tag*).
  struct Tag {
    enum Op { kArrived, kWritten, kFinished, kDone };
    JoinStream* stream;
    Op op;
  };
  static void OnTag(void* tag, bool ok);

  // The call's context and request, for the Arrival handler.
  grpc::ServerContext& context() { return ctx_; }
  const grpc::ByteBuffer& request() const { return request_; }

  // Names the stream, once, before anyone else sees it (the Arrival handler).
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
  JoinStream(StreamOwner* owner, const Arrival* arrival, LiveStreams* live)
      : owner_(owner), arrival_(arrival), live_(live) {
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

  void OnWriteDone(bool ok);
  // The call is over (the client went away, or the server's finish is
  // written): a cancelled call marks the client gone and finishes.
  void OnDone();
  void OnFinished();
  // Both the finish and the done operation are back: reports the end, deletes.
  void End();

  Action NextLocked();
  // The client cancelled, or a write to it failed: finish CANCELLED and
  // remember it went away, unless the server had already chosen the end.
  void MarkClientGoneLocked();
  void Perform(const Action& action);

  StreamOwner* const owner_;
  const Arrival* const arrival_;
  LiveStreams* const live_;
  std::string run_id_;
  NodeId node_;
  uint64_t incarnation_ = 0;
  std::string peer_ip_;

  grpc::ServerContext ctx_;
  grpc::ByteBuffer request_;
  grpc::ServerAsyncWriter<grpc::ByteBuffer> writer_{&ctx_};
  Tag arrived_{this, Tag::kArrived};
  Tag written_{this, Tag::kWritten};
  Tag finished_tag_{this, Tag::kFinished};
  Tag done_{this, Tag::kDone};

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
