// Whether a host named in --rdzv-endpoint is this machine: the test torchrun
// uses to decide which agent hosts the rendezvous.
#pragma once

#include <string>

#include "base/result.h"

namespace ctrun::launcher {

// True for "localhost", a loopback address, this host's name, or a name or
// address that resolves to one of this machine's interface addresses.
// Resolution failures count as "not local".
bool IsLocalHost(const std::string& host);

// This machine's host name ("localhost" when it has none).
std::string HostName();

// The numeric address this machine sends from toward `host`:`port` (the
// source address the kernel picks for a route to it; no packet is sent).
// Unavailable naming the host when it does not resolve or has no route.
Result<std::string> SourceAddressToward(const std::string& host, int port);

}  // namespace ctrun::launcher
