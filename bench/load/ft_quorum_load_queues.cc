// ft_quorum_load's completion queues, their threads, and the tags they
// complete (the watches, the FtSync calls): see ft_quorum_load_driver.h.
#include <string>

#include "ft_quorum_load_driver.h"

namespace ft_quorum_load {
namespace {

constexpr char kWatchOpenKey[] = "ctrun-ft-watch-open";  // rendezvous/grpc/convert/ft_convert.h

}  // namespace

void Load::StartQueues() {
  for (int q = 0; q < o_.queues; ++q) {
    queues_.push_back(std::make_unique<grpc::CompletionQueue>());
    pollers_.emplace_back(&Load::Poll, queues_.back().get());
  }
}

void Load::Poll(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<Op*>(tag)->Done(ok);
}

void Load::StopQueues() {
  if (queues_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    for (Group& g : groups_) {
      if (g.in_flight) g.call->ctx.TryCancel();  // a held call would keep its queue from draining
      if (g.watch) g.watch->Cancel();
    }
  }
  for (auto& cq : queues_) cq->Shutdown();
  for (std::thread& t : pollers_) t.join();  // each returns once its queue is drained
  pollers_.clear();
  queues_.clear();
}

void SyncCall::Done(bool /*ok: always true for a unary call's Finish*/) { load->OnAnswer(*group, status); }

void Watch::Start(v1::Rendezvous::Stub* stub, grpc::CompletionQueue* cq, const v1::FtWatchRequest& request) {
  reader_ = stub->PrepareAsyncFtWatch(&ctx_, request, cq);
  state_ = State::kStarting;
  reader_->StartCall(this);
}

void Watch::Finish() {
  state_ = State::kFinishing;
  reader_->Finish(&status_, this);
}

void Watch::Done(bool ok) {
  switch (state_) {
    case State::kStarting:
      if (!ok) return Finish();
      state_ = State::kOpening;
      reader_->ReadInitialMetadata(this);
      return;
    case State::kOpening: {
      const auto& md = ctx_.GetServerInitialMetadata();
      // Not opened: the server refused it, and OnWatchDone says why.
      load_->OnWatchOpen(ok && md.find(kWatchOpenKey) != md.end());
      if (!ok) return Finish();
      state_ = State::kReading;
      reader_->Read(&event_, this);
      return;
    }
    case State::kReading:
      if (!ok) return Finish();  // the stream ends
      load_->OnWatchEvent();
      reader_->Read(&event_, this);
      return;
    case State::kFinishing:
      load_->OnWatchDone(status_);  // the last it does: the Load may go next
      return;
  }
}

}  // namespace ft_quorum_load
