#include "rendezvous/grpc/server/ft_sync_call.h"

#include "rendezvous/grpc/convert/ft_convert.h"

namespace ctrun::rdzv {

void FtSyncCall::Request(AsyncService* service, grpc::ServerCompletionQueue* cq, FtCallOwner* owner,
                         const std::function<void()>* again, LiveCalls* live) {
  auto* call = new FtSyncCall(owner, again, live);
  // Before the request: the done operation is started when a call matches it.
  call->ctx_.AsyncNotifyWhenDone(&call->done_);
  service->RequestFtSync(&call->ctx_, &call->request_, &call->responder_, cq, cq, &call->arrived_);
}

void FtSyncCall::OnArrived(bool ok) {
  if (!ok) {
    delete this;  // the server is shutting down: no call came, no other operation was started
    return;
  }
  (*again_)();
  owner_->FtSyncArrived(this);
}

void FtSyncCall::Answer(const SyncAnswer& answer) {
  SyncAnswerToProto(answer, &reply_, request_.compact_sources());
  responder_.Finish(reply_, grpc::Status::OK, &finished_tag_);
}

void FtSyncCall::End(const grpc::Status& status) { responder_.FinishWithError(status, &finished_tag_); }

void FtSyncCall::OnFinished(bool /*ok*/) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finish_back_ = true;
  }
  EndIfBack();
}

// Done comes back once the call is over: after the finish, or before it
// when the client went away, which the owner hears of (it ends the call if
// it still holds it; whoever else took it out of the owner's hands ends it
// otherwise).
void FtSyncCall::OnDone(bool /*ok*/) {
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_back_ = true;
    cancelled = !finish_back_ && ctx_.IsCancelled();
  }
  if (cancelled) owner_->FtSyncCancelled(this);
  EndIfBack();
}

void FtSyncCall::EndIfBack() {
  bool end = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = finish_back_ && done_back_;
  }
  if (end) delete this;
}

}  // namespace ctrun::rdzv
