// CallStatus: a failed call to the rendezvous service as the clients report
// it (base/Status, naming the endpoint). RendezvousClient uses it as it is;
// the log client maps its own codes first (log_client.cc).
#pragma once

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace ctrun::rdzv {

// OK -> Ok; UNAVAILABLE -> FailedPrecondition after a failed TLS handshake
// (the message ends with `tls_fix`, what to change), else Unavailable
// ("unreachable"); DEADLINE_EXCEEDED -> DeadlineExceeded; PERMISSION_DENIED
// and FAILED_PRECONDITION -> FailedPrecondition with the server's message;
// CANCELLED -> Aborted; anything else -> Unavailable.
Status CallStatus(const grpc::Status& s, const std::string& endpoint, std::string_view tls_fix);

}  // namespace ctrun::rdzv
