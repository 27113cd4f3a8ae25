#include "rendezvous/grpc/server/ft_streams.h"

#include <spdlog/spdlog.h>

#include "rendezvous/grpc/server/ft_sync_call.h"
#include "rendezvous/grpc/server/ft_watch_stream.h"

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
