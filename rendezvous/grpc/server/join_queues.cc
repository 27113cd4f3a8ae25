#include "rendezvous/grpc/server/join_queues.h"

#include <utility>

namespace ctrun::rdzv {

void JoinQueues::AddTo(grpc::ServerBuilder& builder) {
  for (int i = 0; i < kQueues; ++i) {
    auto q = std::make_unique<Queue>();
    q->cq = builder.AddCompletionQueue();
    queues_.push_back(std::move(q));
  }
}

void JoinQueues::Start(JoinService* service, StreamOwner* owner, JoinStream::Arrival on_join) {
  service_ = service;
  owner_ = owner;
  on_join_ = std::move(on_join);
  for (auto& q : queues_) {
    Queue* queue = q.get();
    queue->arrival = [this, queue](JoinStream* stream) {
      RequestOn(*queue);
      on_join_(stream);
    };
    for (int i = 0; i < kRequestsPerQueue; ++i) RequestOn(*queue);
    queue->thread = std::thread([queue] {
      void* tag = nullptr;
      bool ok = false;
      while (queue->cq->Next(&tag, &ok)) JoinStream::OnTag(tag, ok);
    });
  }
}

void JoinQueues::RequestOn(Queue& q) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) JoinStream::Request(service_, q.cq.get(), owner_, &q.arrival, &live_);
}

void JoinQueues::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  // Started queues: their threads take the last operations back meanwhile.
  if (!queues_.empty() && queues_.front()->thread.joinable()) live_.WaitNone();
  for (auto& q : queues_) q->cq->Shutdown();
  for (auto& q : queues_) {
    if (q->thread.joinable()) {
      q->thread.join();
      continue;
    }
    void* tag = nullptr;  // never started: drained here, as gRPC requires before a queue goes
    bool ok = false;
    while (q->cq->Next(&tag, &ok)) JoinStream::OnTag(tag, ok);
  }
}

}  // namespace ctrun::rdzv
