// JoinQueues: the completion queues, and a thread each, that serve the Join
// method through gRPC's async API (join_stream.h says why not a callback).
// Each queue keeps kRequestsPerQueue Join calls requested: a call that
// arrives is handed to the Arrival handler on its queue's thread, and a new
// request takes its place.
//
// Use: AddTo(builder) before BuildAndStart; Start once the server runs;
// Shutdown after the server's Shutdown (the queues must be drained after the
// server stops and before they are destroyed).
//
// Thread model: AddTo, Start and Shutdown from one thread; the handler runs
// on the queues' threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "rendezvous/grpc/server/join_stream.h"

namespace ctrun::rdzv {

class JoinQueues {
 public:
  // Queues, each with a thread: a completion scans about N / kQueues
  // outstanding operations in Debian's debug-checked libgrpc.
  static constexpr int kQueues = 4;
  // Join calls kept requested per queue: a join storm's calls wait in gRPC
  // for a request at most until a queue's thread takes the next one.
  static constexpr int kRequestsPerQueue = 16;

  JoinQueues() = default;
  ~JoinQueues() { Shutdown(); }
  JoinQueues(const JoinQueues&) = delete;
  JoinQueues& operator=(const JoinQueues&) = delete;

  // Adds the queues to the server being built.
  void AddTo(grpc::ServerBuilder& builder);

  // Requests the first calls and starts the threads. `service` and `owner`
  // must outlive Shutdown; `on_join` is called with each arrived stream.
  void Start(JoinService* service, StreamOwner* owner, JoinStream::Arrival on_join);

  // Stops requesting, waits until every stream has ended (after the
  // server's Shutdown every call is cancelled, so the open streams finish
  // and the requested ones come back unused), then shuts the queues down,
  // drains them and joins the threads. Idempotent; call after the server's
  // Shutdown.
  void Shutdown();

 private:
  struct Queue {
    std::unique_ptr<grpc::ServerCompletionQueue> cq;
    JoinStream::Arrival arrival;  // re-requests on this queue, then on_join_
    std::thread thread;
  };

  // Requests one more Join on `q` unless shutting down.
  void RequestOn(Queue& q);

  JoinService* service_ = nullptr;
  StreamOwner* owner_ = nullptr;
  JoinStream::Arrival on_join_;
  std::vector<std::unique_ptr<Queue>> queues_;
  LiveStreams live_;
  std::mutex mu_;        // guards closed_, and orders requests before the queues' shutdown
  bool closed_ = false;
};

}  // namespace ctrun::rdzv
