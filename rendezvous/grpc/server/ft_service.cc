#include "rendezvous/grpc/server/ft_service.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "rendezvous/grpc/convert/ft_convert.h"

namespace ctrun::rdzv {
namespace {

constexpr char kFtShuttingDown[] = "rendezvous server is shutting down: retry against the new server";

}  // namespace

void FtService::FtSyncArrived(FtSyncCall* call) {
  const v1::FtSyncRequest& request = call->request();
  grpc::Status status = check_.Check(call->context(), request.version(), request.token(), request.run_id());
  FtOutbox out;
  bool held = false;
  if (status.ok()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    if (stopping_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kFtShuttingDown);
    } else {
      call->Hold(next_id_++);
      calls_[call->id()] = call;  // before stepping: its answer may be due at once
      FtOutput output;
      const FtPart part = FtPartFromProto(request);
      const Status synced = runs_.Sync(request.run_id(), FtParamsFromProto(request.params()), SyncCallFromProto(request),
                                       part.part, part.parts, call->id(), Clock::now(), output);
      held = synced.ok();
      if (!held) {
        calls_.erase(call->id());
        status = ToGrpcStatus(synced);
      }
      Route(output, out);
    }
  }
  out.Flush();
  if (!held) call->End(status);
}

void FtService::FtWatchArrived(FtWatchStream* stream) {
  const v1::FtWatchRequest& request = stream->request();
  grpc::Status status = check_.Check(stream->context(), request.version(), request.token(), request.run_id());
  FtOutbox out;
  bool opened = false;
  if (status.ok()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    if (stopping_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kFtShuttingDown);
    } else {
      const uint64_t id = next_id_++;
      FtOutput output;
      const Status watched = runs_.Watch(request.run_id(), FtParamsFromProto(request.params()), request.group(), id,
                                         Clock::now(), output, request.node());
      opened = watched.ok();
      if (opened) {
        stream->context().AddInitialMetadata(kFtWatchOpenKey, "1");
        stream->Hold(id);
        watches_[id] = stream;
      } else {
        status = ToGrpcStatus(watched);
      }
      Route(output, out);
    }
  }
  out.Flush();
  if (opened) {
    stream->Open();
  } else {
    stream->FinishNow(status);
  }
}

grpc::ServerUnaryReactor* FtService::Leave(grpc::CallbackServerContext* context, const v1::FtLeaveRequest* request) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = check_.Check(*context, request->version(), request->token(), request->run_id());
  FtOutbox out;
  if (status.ok()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    if (stopping_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kFtShuttingDown);
    } else {
      FtOutput output;
      status = ToGrpcStatus(
          runs_.Leave(request->run_id(), request->group(), request->reason(), Clock::now(), output,
                         request->finished() ? std::optional<int64_t>(request->finished_step()) : std::nullopt));
      Route(output, out);
    }
  }
  out.Flush();
  reactor->Finish(status);
  return reactor;
}

// The client went away: the call is dropped, not the group lost (its watch
// says that).
void FtService::FtSyncCancelled(FtSyncCall* call) {
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    auto it = calls_.find(call->id());
    if (it == calls_.end() || it->second != call) return;  // being finished by someone else
    calls_.erase(it);
    runs_.DropCall(call->run_id(), call->group(), call->id());
  }
  call->End(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
}

// A watch still in the map ended on the client's side: the group is lost.
void FtService::FtWatchDone(FtWatchStream* stream) {
  FtOutbox out;
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    auto it = watches_.find(stream->id());
    if (it == watches_.end() || it->second != stream) return;
    watches_.erase(it);
    if (!stopping_) {
      FtOutput output;
      runs_.WatchGone(stream->run_id(), stream->group(), stream->id(), Clock::now(), output);
      Route(output, out);
    }
  }
  out.Flush();
}

void FtService::Route(FtOutput& output, FtOutbox& out) {
  mu_.AssertHeld("FtService::Route");
  for (auto& [id, answer] : output.answers) {
    auto it = calls_.find(id);
    if (it == calls_.end()) continue;
    out.answers.emplace_back(it->second, std::move(answer));
    calls_.erase(it);
  }
  for (auto& [id, why] : output.ended_calls) {
    auto it = calls_.find(id);
    if (it == calls_.end()) continue;
    out.ends.emplace_back(it->second, ToGrpcStatus(why));
    calls_.erase(it);
  }
  for (auto& [id, why] : output.ended_watches) {
    auto it = watches_.find(id);
    if (it == watches_.end()) continue;
    if (it->second->RequestFinish(ToGrpcStatus(why))) out.kicks.push_back(it->second);
    watches_.erase(it);
  }
  for (auto& [id, lost] : output.pushes) {
    auto it = watches_.find(id);
    if (it == watches_.end()) continue;
    v1::FtEvent event;
    event.mutable_lost()->set_group(lost.group);
    event.mutable_lost()->set_quorum_id(lost.quorum_id);
    event.mutable_lost()->set_reason(lost.reason);
    if (it->second->Push(std::move(event))) out.kicks.push_back(it->second);
  }
  for (std::string& line : output.logs) out.logs.push_back(std::move(line));
  output = FtOutput{};
  // Wake the timer when an ft run now has an earlier deadline than it sleeps until.
  timer_.WakeBy(runs_.NextDeadline());
}

void FtService::Tick(TimePoint now, FtOutbox& out) {
  mu_.AssertHeld("FtService::Tick");
  FtOutput output;
  runs_.TickDue(now, output);
  Route(output, out);
}

void FtService::EndAll(FtOutbox& out) {
  mu_.AssertHeld("FtService::EndAll");
  FtOutput output;
  runs_.EndAll(output);
  Route(output, out);
}

std::optional<TimePoint> FtService::NextDeadline() const {
  mu_.AssertHeld("FtService::NextDeadline");
  return runs_.NextDeadline();
}

std::optional<FtRunView> FtService::View(const std::string& run_id) const {
  mu_.AssertHeld("FtService::View");
  return runs_.View(run_id);
}

}  // namespace ctrun::rdzv
