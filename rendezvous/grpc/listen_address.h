// The server's listen address: "host:port" parsed, and the reason a bind of
// it failed.
#pragma once

#include <string>

#include "base/result.h"

namespace ctrun::rdzv {

struct HostPort {
  std::string host;  // as written, brackets included for IPv6
  int port = 0;
};

// `address` as HOST:PORT ("[v6]:PORT" for IPv6), PORT in 0..65535.
// InvalidArgument naming the address and the expected form otherwise.
Result<HostPort> ParseListenAddress(const std::string& address);

// Why `hp` cannot be bound: "address in use", the OS reason, or the
// resolver's. gRPC only says that binding failed; a plain bind() of the same
// address tells why. Call it only after a bind of `hp` has failed.
std::string BindFailureReason(const HostPort& hp);

}  // namespace ctrun::rdzv
