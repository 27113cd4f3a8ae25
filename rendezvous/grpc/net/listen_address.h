// The server's listen address: "host:port" parsed (PortMux binds it and says
// why a bind failed).
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

}  // namespace ctrun::rdzv
