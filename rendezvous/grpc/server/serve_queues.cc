#include "rendezvous/grpc/server/serve_queues.h"

#include <utility>

namespace ctrun::rdzv {
namespace {

void Drain(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<AsyncTag*>(tag)->Proceed(ok);
}

}  // namespace

void ServeQueues::AddTo(grpc::ServerBuilder& builder) {
  for (int i = 0; i < kQueues; ++i) {
    auto q = std::make_unique<Queue>();
    q->cq = builder.AddCompletionQueue();
    queues_.push_back(std::move(q));
  }
}

void ServeQueues::Serve(Request request, int per_queue) { methods_.push_back(Method{std::move(request), per_queue}); }

void ServeQueues::Start() {
  for (auto& q : queues_) {
    Queue* queue = q.get();
    for (size_t m = 0; m < methods_.size(); ++m) queue->again.emplace_back([this, queue, m] { RequestOn(*queue, m); });
  }
  for (auto& q : queues_) {
    for (size_t m = 0; m < methods_.size(); ++m) {
      for (int i = 0; i < methods_[m].per_queue; ++i) RequestOn(*q, m);
    }
    grpc::ServerCompletionQueue* cq = q->cq.get();
    q->thread = std::thread([cq] { Drain(cq); });
  }
}

void ServeQueues::RequestOn(Queue& q, size_t m) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) methods_[m].request(q.cq.get(), &q.again[m], &live_);
}

void ServeQueues::Shutdown() {
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
    } else {
      Drain(q->cq.get());  // never started: drained here, as gRPC requires before a queue goes
    }
  }
}

}  // namespace ctrun::rdzv
