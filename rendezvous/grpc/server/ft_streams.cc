#include "rendezvous/grpc/server/ft_streams.h"

#include <spdlog/spdlog.h>

#include "rendezvous/grpc/convert/ft_convert.h"

namespace ctrun::rdzv {

grpc::Status ToGrpcStatus(const Status& status) {
  using C = Status::Code;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case C::kOk: return grpc::Status::OK;
    case C::kInvalidArgument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case C::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
    case C::kFailedPrecondition: code = grpc::StatusCode::FAILED_PRECONDITION; break;
    case C::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
    case C::kDeadlineExceeded: code = grpc::StatusCode::DEADLINE_EXCEEDED; break;
    case C::kAborted: code = grpc::StatusCode::ABORTED; break;
    case C::kResourceExhausted: code = grpc::StatusCode::RESOURCE_EXHAUSTED; break;
    case C::kIOError:
    case C::kInternal: code = grpc::StatusCode::INTERNAL; break;
  }
  return grpc::Status(code, status.message());
}

void FtSyncCall::Answer(const SyncAnswer& answer) {
  SyncAnswerToProto(answer, reply_, compact_sources_);
  Finish(grpc::Status::OK);
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

void FtWatchStream::OnSendInitialMetadataDone(bool ok) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok && !finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
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

void FtWatchStream::OnWriteDone(bool ok) {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.pop_front();
    writing_ = false;
    if (!ok) {
      queue_.clear();
      if (!finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
    action = NextLocked();
  }
  Perform(action);
}

void FtWatchStream::OnCancel() {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    action = NextLocked();
  }
  Perform(action);
}

// The server removes a stream it ends from its map first: one still there
// ended on the client's side.
void FtWatchStream::OnDone() {
  owner_->FtWatchDone(this);
  delete this;
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
  if (action.kind == Action::kMetadata) StartSendInitialMetadata();
  if (action.kind == Action::kWrite) StartWrite(action.event);
  if (action.kind == Action::kFinish) Finish(action.status);
}

void FtOutbox::Flush() {
  for (const std::string& line : logs) spdlog::info("{}", line);
  logs.clear();
  for (auto& [call, answer] : answers) call->Answer(answer);
  answers.clear();
  for (auto& [call, status] : ends) call->End(status);
  ends.clear();
  for (FtWatchStream* s : kicks) s->Kick();
  kicks.clear();
}

}  // namespace ctrun::rdzv
