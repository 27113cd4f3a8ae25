// The rendezvous server an agent hosts (ctrun-full): for its own gRPC
// rendezvous (remote_setup.cc), and as the quorum server of a fault-tolerant
// launch (launcher/ft/ft_setup.h).
#pragma once

#include <memory>

#include "base/result.h"
#include "launcher/rdzv/grpc_rendezvous.h"
#include "launcher/rdzv/resolve.h"

namespace ctrun::launcher {

// The server of plan.host, or null when another agent hosts it (a hosting
// that was only inferred and whose address is taken). A listen address with
// port 0 binds a free port: plan.endpoint takes the bound one (the agent's
// own client joins there, and the workers' MASTER_PORT is that port when the
// server serves their store), and the log line says it. Unavailable when a
// required hosting (is_host=1) or a free port cannot listen, or the status
// page (--rdzv-conf metrics_port) cannot be served.
Result<std::unique_ptr<HostedServer>> HostRendezvousServer(RendezvousPlan& plan, const HostPlan& host);

}  // namespace ctrun::launcher
