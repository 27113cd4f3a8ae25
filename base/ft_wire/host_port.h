// A `host:port` of the FT line protocol (the ring's right neighbour, a
// healing source): written host + ":" + port, read split at the last ':'.
// An IPv6 host may be written in brackets ("[::1]:4000"), which reading
// removes. Ports are 1..65535.
//
// Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ctrun::ft_wire {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// `host:port` as the lines carry it (the host as given: brackets, if any,
// are the caller's).
std::string FormatHostPort(std::string_view host, uint16_t port);

// "host:port" (see above). InvalidArgument naming `what` when malformed.
Result<HostPort> ParseHostPort(std::string_view text, std::string_view what);

}  // namespace ctrun::ft_wire
