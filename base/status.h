// Status: the outcome of an operation that can fail, as a value.
//
// A Status is either OK or carries a code and a one-line, plain-English
// message that names the bad input and, where there is one, the fix.
// OK costs nothing but a null check. Copyable; not thread-safe to mutate.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace ctrun {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,   // a flag, env value, message or file is malformed
    kNotFound,          // a named thing (file, script, run id) does not exist
    kFailedPrecondition,// the request is valid but the state forbids it
    kUnavailable,       // a peer or resource cannot be reached right now
    kDeadlineExceeded,  // a configured timeout ran out
    kAborted,           // the operation was cut short (signal, closed run)
    kIOError,           // the OS refused (errno-style failures)
    kInternal,          // a bug: an invariant did not hold
    kResourceExhausted, // a job-wide budget ran out (e.g. --max-unhealthy-nodes)
  };

  Status() = default;  // OK

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {Code::kInvalidArgument, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status FailedPrecondition(std::string msg) { return {Code::kFailedPrecondition, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status DeadlineExceeded(std::string msg) { return {Code::kDeadlineExceeded, std::move(msg)}; }
  static Status Aborted(std::string msg) { return {Code::kAborted, std::move(msg)}; }
  static Status IOError(std::string msg) { return {Code::kIOError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }
  static Status ResourceExhausted(std::string msg) { return {Code::kResourceExhausted, std::move(msg)}; }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  // The one-line message; empty when OK.
  const std::string& message() const;

  bool IsInvalidArgument() const { return code() == Code::kInvalidArgument; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  bool IsUnavailable() const { return code() == Code::kUnavailable; }
  bool IsDeadlineExceeded() const { return code() == Code::kDeadlineExceeded; }
  bool IsAborted() const { return code() == Code::kAborted; }

  // "OK", or "<code name>: <message>".
  std::string ToString() const;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  Status(Code code, std::string msg)
      : rep_(std::make_shared<const Rep>(Rep{code, std::move(msg)})) {}

  std::shared_ptr<const Rep> rep_;  // null means OK
};

std::string_view CodeName(Status::Code code);

}  // namespace ctrun
