// RendezvousServer::Impl's fault-tolerance handlers (server_impl.h; the
// semantics are FtRuns', ft_runs.h): each checks the token and version,
// steps FtRuns under mu_, and does the gRPC work (answers, ends, pushes)
// after the lock is released (FtOutbox).
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "rendezvous/grpc/ft_convert.h"
#include "rendezvous/grpc/server_impl.h"

namespace ctrun::rdzv {
namespace {

constexpr char kFtShuttingDown[] = "rendezvous server is shutting down: retry against the new server";

}  // namespace

grpc::ServerUnaryReactor* RendezvousServer::Impl::FtSync(grpc::CallbackServerContext* context,
                                                         const v1::FtSyncRequest* request, v1::FtSyncReply* reply) {
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  FtOutbox out;
  FtSyncCall* call = nullptr;
  if (status.ok()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    if (stopping_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kFtShuttingDown);
    } else {
      call = new FtSyncCall(this, ft_next_id_++, request->run_id(), request->group(), reply);
      ft_calls_[call->id()] = call;  // before stepping: its answer may be due at once
      FtOutput output;
      const FtPart part = FtPartFromProto(*request);
      const Status held = ft_runs_.Sync(request->run_id(), FtParamsFromProto(request->params()),
                                        SyncCallFromProto(*request), part.part, part.parts, call->id(), Clock::now(),
                                        output);
      if (!held.ok()) {
        ft_calls_.erase(call->id());
        delete call;  // gRPC never saw it
        call = nullptr;
        status = ToGrpcStatus(held);
      }
      FtRoute(output, out);
    }
  }
  out.Flush();
  if (call) return call;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerWriteReactor<v1::FtEvent>* RendezvousServer::Impl::FtWatch(grpc::CallbackServerContext* context,
                                                                       const v1::FtWatchRequest* request) {
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  FtOutbox out;
  FtWatchStream* stream = nullptr;
  if (status.ok()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    if (stopping_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kFtShuttingDown);
    } else {
      const uint64_t id = ft_next_id_++;
      FtOutput output;
      const Status opened = ft_runs_.Watch(request->run_id(), FtParamsFromProto(request->params()), request->group(),
                                           id, Clock::now(), output, request->node());
      if (opened.ok()) {
        context->AddInitialMetadata(kFtWatchOpenKey, "1");
        stream = new FtWatchStream(this, id, request->run_id(), request->group());
        ft_watches_[id] = stream;
      } else {
        status = ToGrpcStatus(opened);
      }
      FtRoute(output, out);
    }
  }
  out.Flush();
  if (stream) {
    stream->Open();
    return stream;
  }
  auto* refused = new FtWatchStream(this, 0, request->run_id(), request->group());
  refused->FinishNow(status);
  return refused;
}

grpc::ServerUnaryReactor* RendezvousServer::Impl::FtLeave(grpc::CallbackServerContext* context,
                                                          const v1::FtLeaveRequest* request,
                                                          v1::FtLeaveReply* /*reply*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = call_check_.Check(*context, request->version(), request->token(), request->run_id());
  FtOutbox out;
  if (status.ok()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    if (stopping_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kFtShuttingDown);
    } else {
      FtOutput output;
      status = ToGrpcStatus(
          ft_runs_.Leave(request->run_id(), request->group(), request->reason(), Clock::now(), output,
                         request->finished() ? std::optional<int64_t>(request->finished_step()) : std::nullopt));
      FtRoute(output, out);
    }
  }
  out.Flush();
  reactor->Finish(status);
  return reactor;
}

// The client went away: the call is dropped, not the group lost (its watch
// says that).
void RendezvousServer::Impl::FtSyncCancelled(FtSyncCall* call) {
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    auto it = ft_calls_.find(call->id());
    if (it == ft_calls_.end() || it->second != call) return;  // being finished by someone else
    ft_calls_.erase(it);
    ft_runs_.DropCall(call->run_id(), call->group(), call->id());
  }
  call->End(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
}

// A watch still in the map ended on the client's side: the group is lost.
void RendezvousServer::Impl::FtWatchDone(FtWatchStream* stream) {
  FtOutbox out;
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    auto it = ft_watches_.find(stream->id());
    if (it == ft_watches_.end() || it->second != stream) return;
    ft_watches_.erase(it);
    if (!stopping_) {
      FtOutput output;
      ft_runs_.WatchGone(stream->run_id(), stream->group(), stream->id(), Clock::now(), output);
      FtRoute(output, out);
    }
  }
  out.Flush();
}

void RendezvousServer::Impl::FtRoute(FtOutput& output, FtOutbox& out) {
  mu_.AssertHeld("FtRoute");
  for (auto& [id, answer] : output.answers) {
    auto it = ft_calls_.find(id);
    if (it == ft_calls_.end()) continue;
    out.answers.emplace_back(it->second, std::move(answer));
    ft_calls_.erase(it);
  }
  for (auto& [id, why] : output.ended_calls) {
    auto it = ft_calls_.find(id);
    if (it == ft_calls_.end()) continue;
    out.ends.emplace_back(it->second, ToGrpcStatus(why));
    ft_calls_.erase(it);
  }
  for (auto& [id, why] : output.ended_watches) {
    auto it = ft_watches_.find(id);
    if (it == ft_watches_.end()) continue;
    if (it->second->RequestFinish(ToGrpcStatus(why))) out.kicks.push_back(it->second);
    ft_watches_.erase(it);
  }
  for (auto& [id, lost] : output.pushes) {
    auto it = ft_watches_.find(id);
    if (it == ft_watches_.end()) continue;
    v1::FtEvent event;
    event.mutable_lost()->set_group(lost.group);
    event.mutable_lost()->set_quorum_id(lost.quorum_id);
    event.mutable_lost()->set_reason(lost.reason);
    if (it->second->Push(std::move(event))) out.kicks.push_back(it->second);
  }
  for (std::string& line : output.logs) out.logs.push_back(std::move(line));
  output = FtOutput{};
  // Wake the timer when an ft run now has an earlier deadline than it sleeps until.
  if (std::optional<TimePoint> next = ft_runs_.NextDeadline(); next && (!timer_target_ || *next < *timer_target_)) {
    timer_dirty_ = true;
    timer_cv_.notify_one();
  }
}

void RendezvousServer::Impl::FtTick(TimePoint now, FtOutbox& out) {
  mu_.AssertHeld("FtTick");
  FtOutput output;
  ft_runs_.TickDue(now, output);
  FtRoute(output, out);
}

void RendezvousServer::Impl::FtEndAll(FtOutbox& out) {
  mu_.AssertHeld("FtEndAll");
  FtOutput output;
  ft_runs_.EndAll(output);
  FtRoute(output, out);
}

}  // namespace ctrun::rdzv
