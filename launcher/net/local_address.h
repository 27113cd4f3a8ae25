// Whether a host named in --rdzv-endpoint is this machine: the test torchrun
// uses to decide which agent hosts the rendezvous.
#pragma once

#include <string>

namespace ctrun::launcher {

// True for "localhost", a loopback address, this host's name, or a name or
// address that resolves to one of this machine's interface addresses.
// Resolution failures count as "not local".
bool IsLocalHost(const std::string& host);

// This machine's host name ("localhost" when it has none).
std::string HostName();

}  // namespace ctrun::launcher
