// ClientCalls and ReadCall<Message>: the bookkeeping a callback-API client of
// the rendezvous service keeps for its calls (RendezvousClient's Join
// streams and unary calls, FtClient's watch and unary calls).
//
// Contract:
//  - Every call is counted from its start until gRPC's last callback for it
//    has returned; WaitIdle blocks until none is left, so a client's
//    destructor can cancel everything and then wait before its stub and
//    channel go away.
//  - Results reach the caller through the client's Post, as base/Status
//    (the client's StatusMap of the gRPC status, worded for `endpoint`).
//  - A client holds one current stream at a time: NewStream marks the
//    previous one stale (its callbacks are dropped from then on, it is not
//    cancelled: a cancelled stream tells the server the node is gone), and
//    CancelStreams marks it stale and cancels every stream not yet done.
//
// Thread model: NewStream and CancelStreams on the caller's thread (the one
// that owns the client); the rest from any thread (gRPC's included).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/status.h"

namespace ctrun::rdzv {

class ClientCalls {
 public:
  // Runs a callback on the client's caller's thread (as RendezvousClient::Post).
  using Post = std::function<void(std::function<void()>)>;
  // A call's gRPC status as the client reports it.
  using StatusMap = Status (*)(const grpc::Status& s, const std::string& endpoint);
  // The flag of one stream: set once the stream is no longer the current one.
  using Stale = std::shared_ptr<std::atomic<bool>>;

  ClientCalls(std::string endpoint, StatusMap map, Post post)
      : endpoint_(std::move(endpoint)), map_(map), post_(std::move(post)) {}
  ClientCalls(const ClientCalls&) = delete;
  ClientCalls& operator=(const ClientCalls&) = delete;

  // A call starts: counted, and its context cancelled by CancelStreams
  // (`stream`) or CancelAll.
  void Begin(grpc::ClientContext* ctx, bool stream) {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
    (stream ? streams_ : unary_).insert(ctx);
  }
  // The call's context is about to go: no longer cancelled by anyone.
  void Forget(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.erase(ctx);
    unary_.erase(ctx);
  }
  // gRPC's last callback for a call is done with it.
  void End() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--in_flight_ == 0) idle_.notify_all();
  }

  // The flag of the stream the caller is about to open; the previous
  // stream's flag is set.
  Stale NewStream() {
    if (stale_) *stale_ = true;
    stale_ = std::make_shared<std::atomic<bool>>(false);
    return stale_;
  }
  // Marks the current stream stale and cancels every stream not yet done.
  void CancelStreams() {
    if (stale_) *stale_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    for (grpc::ClientContext* ctx : streams_) ctx->TryCancel();
  }
  // The destructor's part: cancels every call and waits for their ends.
  void CancelAllAndWait() {
    CancelStreams();
    std::unique_lock<std::mutex> lock(mu_);
    for (grpc::ClientContext* ctx : unary_) ctx->TryCancel();
    idle_.wait(lock, [this] { return in_flight_ == 0; });
  }

  // One unary call with the callback API: `method(async, ctx, req, rep,
  // callback)` starts it on the async stub; `finish(status, reply)` runs
  // through Post.
  template <typename Req, typename Rep, typename Async, typename Method, typename Finish>
  void Unary(Async* async, Method method, Req req, std::optional<Duration> timeout, Finish finish,
             bool wait_for_ready = true) {
    struct Call {
      grpc::ClientContext ctx;
      Req req;
      Rep rep;
    };
    auto call = std::make_shared<Call>();
    call->req = std::move(req);
    if (timeout) call->ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
    call->ctx.set_wait_for_ready(wait_for_ready);
    Begin(&call->ctx, /*stream=*/false);
    method(async, &call->ctx, &call->req, &call->rep, [this, call, finish](grpc::Status s) {
      Forget(&call->ctx);
      Status status = map_(s, endpoint_);
      post_([call, finish, status] { finish(status, call->rep); });
      End();
    });
  }

  Status Map(const grpc::Status& s) const { return map_(s, endpoint_); }
  // Posts `cb` to the caller's thread, where it runs unless `stale` is set
  // by then.
  void PostUnlessStale(const Stale& stale, std::function<void()> cb) {
    post_([stale, cb = std::move(cb)] {
      if (!*stale) cb();
    });
  }

 private:
  const std::string endpoint_;
  const StatusMap map_;
  const Post post_;
  std::mutex mu_;  // guards the four below
  std::set<grpc::ClientContext*> streams_;  // streams not yet done
  std::set<grpc::ClientContext*> unary_;
  int in_flight_ = 0;
  std::condition_variable idle_;
  Stale stale_;  // the current stream's; the caller's thread only
};

// One server-streaming call of a client: reads every message, hands each to
// OnMessage (on gRPC's thread), and at the end posts `on_end` with the
// mapped status unless the stream went stale. Made with new; deletes itself
// in OnDone. A subclass starts the call on its stub with context() and
// itself, then calls StartReading.
template <class Message>
class ReadCall : public grpc::ClientReadReactor<Message> {
 public:
  ReadCall(ClientCalls& calls, std::function<void(const Status&)> on_end)
      : calls_(calls), stale_(calls.NewStream()), on_end_(std::move(on_end)) {}

 protected:
  // Each message read. A subclass hands it on with Post.
  virtual void OnMessage(const Message& message) = 0;

  grpc::ClientContext& context() { return ctx_; }
  // Counts the call and reads its first message; then starts the call.
  void StartReading() {
    calls_.Begin(&ctx_, /*stream=*/true);
    this->StartRead(&message_);
    this->StartCall();
  }
  // `cb` on the caller's thread, unless this stream is stale by then.
  void Post(std::function<void()> cb) { calls_.PostUnlessStale(stale_, std::move(cb)); }

 private:
  void OnReadDone(bool ok) final {
    if (!ok) return;  // OnDone follows
    OnMessage(message_);
    this->StartRead(&message_);
  }

  void OnDone(const grpc::Status& s) final {
    Post([cb = on_end_, status = calls_.Map(s)] { cb(status); });
    ClientCalls& calls = calls_;
    calls.Forget(&ctx_);
    delete this;
    calls.End();
  }

  ClientCalls& calls_;
  const ClientCalls::Stale stale_;
  std::function<void(const Status&)> on_end_;
  grpc::ClientContext ctx_;
  Message message_;
};

}  // namespace ctrun::rdzv
