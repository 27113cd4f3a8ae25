#include "rendezvous/grpc/server/join_stream.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace ctrun::rdzv {

void JoinStream::Request(AsyncService* service, grpc::ServerCompletionQueue* cq, StreamOwner* owner,
                         const std::function<void()>* again, LiveCalls* live) {
  auto* stream = new JoinStream(owner, again, live);
  // Before the request: the done operation is started when a call matches it.
  stream->ctx_.AsyncNotifyWhenDone(&stream->done_);
  service->RequestJoin(&stream->ctx_, &stream->request_, &stream->writer_, cq, cq, &stream->arrived_);
}

void JoinStream::OnArrived(bool ok) {
  if (!ok) {
    delete this;  // the server is shutting down: no call came, no other operation was started
    return;
  }
  (*again_)();
  owner_->JoinArrived(this);
}

bool JoinStream::client_gone() const {
  std::lock_guard<std::mutex> lock(mu_);
  return client_gone_;
}

bool JoinStream::Enqueue(const v1::Update& update, bool finish_after) {
  std::optional<uint64_t> round;
  if (update.has_round_complete()) round = update.round_complete().round();
  const grpc::Slice bytes(update.SerializeAsString());
  return EnqueueBytes(grpc::ByteBuffer(&bytes, 1), round, finish_after);
}

bool JoinStream::EnqueueBytes(grpc::ByteBuffer update, std::optional<uint64_t> round, bool finish_after) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finish_) return false;
  queue_.push_back(Queued{std::move(update), round});
  if (finish_after) finish_ = grpc::Status::OK;
  ++holds_;
  return true;
}

bool JoinStream::RequestFinish(grpc::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finish_) return false;
  finish_ = std::move(status);
  ++holds_;
  return true;
}

void JoinStream::FinishNow(grpc::Status status) {
  if (RequestFinish(std::move(status))) Kick();
}

void JoinStream::Kick() {
  Action action;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --holds_;
    action = NextLocked();
  }
  Perform(action);
}

void JoinStream::OnWriteDone(bool ok) {
  Action action;
  std::optional<uint64_t> round_sent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ok) round_sent = queue_.front().round;
    queue_.pop_front();
    writing_ = false;
    if (!ok) {
      queue_.clear();
      MarkClientGoneLocked();
    }
    action = NextLocked();
  }
  if (round_sent && spdlog::should_log(spdlog::level::debug)) {
    // Timestamped: bench/rendezvous.py takes the last one as "round complete".
    spdlog::debug("rendezvous run '{}': round {} sent to {}", run_id_, *round_sent, ToString(node_));
  }
  Perform(action);
}

void JoinStream::OnDone(bool /*ok*/) {
  Action action;
  bool end = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_back_ = true;
    if (ctx_.IsCancelled()) MarkClientGoneLocked();
    action = NextLocked();
    end = finish_back_;
  }
  Perform(action);
  if (end) End();
}

void JoinStream::OnFinished(bool /*ok*/) {
  bool end = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finish_back_ = true;
    end = done_back_;
  }
  if (end) End();
}

void JoinStream::End() {
  owner_->StreamDone(this);
  delete this;
}

// A client that cancels while a write is in flight is seen twice (OnCancel,
// then that write failing): the first sets finish_, and the second must not
// take the stream for one the server ended. (It did: a node killed while a
// RestartRequested was being written to it was then not taken as gone, and
// the others waited for its keep-alives to run out.)
void JoinStream::MarkClientGoneLocked() {
  if (finish_) return;
  client_gone_ = true;
  finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
}

JoinStream::Action JoinStream::NextLocked() {
  if (finished_ || writing_) return {};
  if (!queue_.empty()) {
    writing_ = true;
    return {Action::kWrite, &queue_.front().bytes, {}};
  }
  if (finish_ && holds_ == 0) {
    finished_ = true;
    return {Action::kFinish, nullptr, *finish_};
  }
  return {};
}

void JoinStream::Perform(const Action& action) {
  if (action.kind == Action::kWrite) writer_.Write(*action.update, &written_);
  if (action.kind == Action::kFinish) writer_.Finish(action.status, &finished_tag_);
}

void Outbox::Flush() {
  for (JoinStream* s : kicks) s->Kick();
  kicks.clear();
  for (const std::string& line : logs) spdlog::info("{}", line);
  logs.clear();
  for (const std::string& line : debug_logs) spdlog::debug("{}", line);
  debug_logs.clear();
  for (auto& call : calls) call();
  calls.clear();
}

}  // namespace ctrun::rdzv
