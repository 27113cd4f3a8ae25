#include "rendezvous/grpc/client/call_status.h"

namespace ctrun::rdzv {

Status CallStatus(const grpc::Status& s, const std::string& endpoint, std::string_view tls_fix) {
  if (s.ok()) return Status::Ok();
  const std::string what = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      if (what.find("andshake") != std::string::npos) {
        return Status::FailedPrecondition("TLS handshake with the rendezvous at " + endpoint + " failed (" + what +
                                          "): " + std::string(tls_fix));
      }
      return Status::Unavailable("rendezvous at " + endpoint + " is unreachable: " + what);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded("rendezvous at " + endpoint + " did not answer in time");
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(what);
    case grpc::StatusCode::CANCELLED:
      return Status::Aborted("rendezvous call cancelled");
    default:
      return Status::Unavailable("rendezvous at " + endpoint + ": " + what);
  }
}

}  // namespace ctrun::rdzv
