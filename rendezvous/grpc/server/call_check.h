// CallCheck: the checks every rendezvous call passes before its handler
// steps anything: the shared token and the protocol version. Refusals for a
// wrong token are logged at warn, at most one line a second, with the
// caller's address: a stranger hammering the port must not flood the log.
//
// Thread model: thread-safe; one per server.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "rendezvous.pb.h"

namespace ctrun::rdzv {

class CallCheck {
 public:
  // `token` empty: every caller is let in (the version is still checked).
  explicit CallCheck(std::string token) : token_(std::move(token)) {}

  CallCheck(const CallCheck&) = delete;
  CallCheck& operator=(const CallCheck&) = delete;

  // OK when the call may go on. PERMISSION_DENIED when the server has a token
  // and `token` is not it (logged, rate limited, naming the caller's address and `run_id`);
  // FAILED_PRECONDITION when `version` is not kProtocolVersion (proto_convert.h).
  grpc::Status Check(const grpc::ServerContextBase& context, v1::ProtocolVersion version, const std::string& token,
                     const std::string& run_id);

 private:
  void NoteRefusal(const std::string& peer, const std::string& run_id, const char* what);

  const std::string token_;
  std::mutex mu_;  // guards the two below
  std::chrono::steady_clock::time_point next_log_{};
  uint64_t suppressed_ = 0;
};

}  // namespace ctrun::rdzv
