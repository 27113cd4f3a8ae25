// ServeQueues: the completion queues, and a thread each, on which the server
// serves its async methods (async_calls.h says which and why). Each queue
// keeps a few calls of each method requested: a call that arrives is handed
// to its handler on its queue's thread, and a new request takes its place.
//
// Use: AddTo(builder) before BuildAndStart; Serve each method, then Start,
// once the server runs; Shutdown after the server's Shutdown (the queues
// must be drained after the server stops and before they are destroyed).
//
// Thread model: AddTo, Serve, Start and Shutdown from one thread; the call
// objects' steps run on the queues' threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "rendezvous/grpc/server/async_calls.h"

namespace ctrun::rdzv {

class ServeQueues {
 public:
  // Queues, each with a thread: a completion scans about N / kQueues
  // outstanding operations in Debian's debug-checked libgrpc.
  static constexpr int kQueues = 4;

  // Asks gRPC for one more call of a method on `cq`. The call object it
  // makes counts itself in `live` while it exists, takes all its
  // operations' tags (AsyncTag) on `cq`, and calls `again` once when its
  // call arrives, before anything else, so that another request takes its
  // place. All three outlive the call object.
  using Request =
      std::function<void(grpc::ServerCompletionQueue* cq, const std::function<void()>* again, LiveCalls* live)>;

  ServeQueues() = default;
  ~ServeQueues() { Shutdown(); }
  ServeQueues(const ServeQueues&) = delete;
  ServeQueues& operator=(const ServeQueues&) = delete;

  // Adds the queues to the server being built.
  void AddTo(grpc::ServerBuilder& builder);

  // Before Start: serves a method, keeping `per_queue` calls of it requested
  // on each queue (a storm's calls wait in gRPC for a request at most until
  // a queue's thread takes the next one).
  void Serve(Request request, int per_queue);

  // Requests the first calls and starts the threads.
  void Start();

  // Stops requesting, waits until every call object has ended (after the
  // server's Shutdown every call is cancelled, so the open ones finish and
  // the requested ones come back unused), then shuts the queues down,
  // drains them and joins the threads. Idempotent; call after the server's
  // Shutdown.
  void Shutdown();

 private:
  struct Method {
    Request request;
    int per_queue = 0;
  };
  struct Queue {
    std::unique_ptr<grpc::ServerCompletionQueue> cq;
    std::vector<std::function<void()>> again;  // per method: re-requests it here; fixed before Start
    std::thread thread;
  };

  // Requests one more call of method `m` on `q` unless shutting down.
  void RequestOn(Queue& q, size_t m);

  std::vector<Method> methods_;
  std::vector<std::unique_ptr<Queue>> queues_;
  LiveCalls live_;
  std::mutex mu_;  // guards closed_, and orders requests before the queues' shutdown
  bool closed_ = false;
};

}  // namespace ctrun::rdzv
