#include "rendezvous/grpc/server/ft_watch_stream.h"

#include <utility>

namespace ctrun::rdzv {

void FtWatchStream::Request(AsyncService* service, grpc::ServerCompletionQueue* cq, FtCallOwner* owner,
                            const std::function<void()>* again, LiveCalls* live) {
  auto* stream = new FtWatchStream(owner, again, live);
  // Before the request: the done operation is started when a call matches it.
  stream->ctx_.AsyncNotifyWhenDone(&stream->done_);
  service->RequestFtWatch(&stream->ctx_, &stream->request_, &stream->writer_, cq, cq, &stream->arrived_);
}

void FtWatchStream::OnArrived(bool ok) {
  if (!ok) {
    delete this;  // the server is shutting down: no call came, no other operation was started
    return;
  }
  (*again_)();
  owner_->FtWatchArrived(this);
}

bool FtWatchStream::Push(v1::FtEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finish_) return false;
  if (queue_.size() >= kMaxFtWatchQueue) {
    // The front may be in flight; drop the oldest one after it.
    queue_.erase(queue_.begin() + (writing_ ? 1 : 0));
  }
  queue_.push_back(std::move(event));
  ++holds_;
  return true;
}

bool FtWatchStream::RequestFinish(grpc::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finish_) return false;
  finish_ = std::move(status);
  ++holds_;
  return true;
}

void FtWatchStream::FinishNow(grpc::Status status) {
  if (RequestFinish(std::move(status))) Kick();
}

void FtWatchStream::Open() {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    opened_ = true;
    action = NextLocked();
  }
  Perform(action);
}

void FtWatchStream::Kick() {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --holds_;
    action = NextLocked();
  }
  Perform(action);
}

void FtWatchStream::OnMetadataSent(bool ok) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) MarkGoneLocked();
    action = NextLocked();
  }
  Perform(action);
}

void FtWatchStream::OnWriteDone(bool ok) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.pop_front();
    writing_ = false;
    if (!ok) {
      queue_.clear();
      MarkGoneLocked();
    }
    action = NextLocked();
  }
  Perform(action);
}

void FtWatchStream::OnFinished(bool /*ok*/) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finish_back_ = true;
  }
  EndIfBack();
}

void FtWatchStream::OnDone(bool /*ok*/) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_back_ = true;
    if (ctx_.IsCancelled()) MarkGoneLocked();
    action = NextLocked();
  }
  Perform(action);
  EndIfBack();
}

// The server removes a stream it ends from its map first: one still there
// ended on the client's side (FtWatchDone).
void FtWatchStream::EndIfBack() {
  bool end = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = finish_back_ && done_back_;
  }
  if (!end) return;
  owner_->FtWatchDone(this);
  delete this;
}

void FtWatchStream::MarkGoneLocked() {
  if (!finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
}

FtWatchStream::Action FtWatchStream::NextLocked() {
  if (finished_ || writing_) return {};
  if (opened_ && !metadata_sent_ && !finish_) {
    metadata_sent_ = true;
    writing_ = true;
    return {Action::kMetadata, nullptr, {}};
  }
  if (!queue_.empty()) {
    metadata_sent_ = true;  // the first write carries it
    writing_ = true;
    return {Action::kWrite, &queue_.front(), {}};
  }
  if (finish_ && holds_ == 0) {
    finished_ = true;
    return {Action::kFinish, nullptr, *finish_};
  }
  return {};
}

void FtWatchStream::Perform(const Action& action) {
  if (action.kind == Action::kMetadata) writer_.SendInitialMetadata(&metadata_tag_);
  if (action.kind == Action::kWrite) writer_.Write(*action.event, &written_);
  if (action.kind == Action::kFinish) writer_.Finish(action.status, &finished_tag_);
}

}  // namespace ctrun::rdzv
