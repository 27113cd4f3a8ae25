#include "base/status.h"

namespace ctrun {

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code())) + ": " + rep_->message;
}

std::string_view CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kInvalidArgument: return "invalid argument";
    case Status::Code::kNotFound: return "not found";
    case Status::Code::kFailedPrecondition: return "failed precondition";
    case Status::Code::kUnavailable: return "unavailable";
    case Status::Code::kDeadlineExceeded: return "deadline exceeded";
    case Status::Code::kAborted: return "aborted";
    case Status::Code::kIOError: return "I/O error";
    case Status::Code::kInternal: return "internal error";
    case Status::Code::kResourceExhausted: return "resource exhausted";
  }
  return "unknown";
}

}  // namespace ctrun
