// JoinStream: the server side of one Join call, a stream of Updates to one
// node. Outbox: the gRPC work a handler collects under the server's lock and
// does after releasing it.
//
// Updates are queued under the server's lock (Enqueue, RequestFinish) and
// written one at a time with no lock held (Kick and gRPC's callbacks). The
// stream carries serialized Updates (the service's Join is a raw method), so
// a round's RoundComplete is queued as bytes shared by every member's stream
// (round_push.h) instead of one copy per member.
//
// Lifetime: gRPC calls OnDone only after Finish, and Finish waits until no
// holder is left, so a stream that was held under the server's lock (a true
// Enqueue or RequestFinish) stays valid until the holder's Kick(). OnDone
// reports the end to the StreamOwner, then deletes the stream.
//
// Thread model: thread-safe; its own mutex guards the queue.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

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

class JoinStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `owner` must outlive the stream.
  // `peer_ip`: the address the call came from (PeerIp; "" if unknown).
  JoinStream(StreamOwner* owner, std::string run_id, NodeId node, uint64_t incarnation, std::string peer_ip = "")
      : owner_(owner),
        run_id_(std::move(run_id)),
        node_(std::move(node)),
        incarnation_(incarnation),
        peer_ip_(std::move(peer_ip)) {}

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

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Action {
    enum Kind { kNone, kWrite, kFinish } kind = kNone;
    const grpc::ByteBuffer* update = nullptr;
    grpc::Status status;
  };
  struct Queued {
    grpc::ByteBuffer bytes;
    std::optional<uint64_t> round;  // of the RoundComplete it holds
  };

  Action NextLocked();
  // The client cancelled, or a write to it failed: finish CANCELLED and
  // remember it went away, unless the server had already chosen the end.
  void MarkClientGoneLocked();
  void Perform(const Action& action);

  StreamOwner* const owner_;
  const std::string run_id_;
  const NodeId node_;
  const uint64_t incarnation_;
  const std::string peer_ip_;

  mutable std::mutex mu_;
  bool client_gone_ = false;
  std::deque<Queued> queue_;  // front is being written while writing_; deque keeps it in place
  bool writing_ = false;
  std::optional<grpc::Status> finish_;  // wanted after the queue drains
  bool finished_ = false;               // Finish called: OnDone may come at any time
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
