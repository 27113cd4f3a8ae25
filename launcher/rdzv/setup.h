// Chooses and builds this node's RendezvousHandler from the LaunchConfig:
//
//   --nnodes 1 / --standalone        LocalRendezvous (no network)
//   --rdzv-backend c10d (or grpc)    GrpcRendezvous with the server at
//                                    --rdzv-endpoint (default port 29400), hosted
//                                    by the agent on that host (or is_host=1)
//   --rdzv-backend static            GrpcRendezvous with fixed membership: the
//                                    node-rank-0 agent hosts ctrun's rendezvous at
//                                    --master-addr:(--master-port + 1) (or at
//                                    --rdzv-endpoint when given); group ranks are
//                                    the node ranks; workers get exactly
//                                    --master-addr:--master-port
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "rendezvous/machine/rdzv_params.h"

namespace ctrun::launcher {

// Errors: InvalidArgument for a combination the backend cannot serve (a
// missing endpoint, an etcd backend, an unreadable token file); Unavailable
// when is_host=1 was given and the server cannot listen. `io` and `config`
// must outlive the handler.
// `store` says who hosts the workers' store (see AgentStorePort).
Result<std::unique_ptr<RendezvousHandler>> MakeRendezvous(boost::asio::io_context& io,
                                                          const LaunchConfig& config,
                                                          const Environment& env,
                                                          const StoreHosting& store);

// The port this node's agent binds for the workers' store, or nullopt when
// it hosts none (--no-agent-store; a static-backend node other than node
// rank 0). 0 means any free port:
//   one node     --master-port when given, else any
//   static       --master-port on node rank 0 (workers get exactly
//                --master-addr:--master-port)
//   c10d, etcd   any: each agent advertises its store's port when it joins,
//                and the round's group rank 0 is the one the workers use
std::optional<int> AgentStorePort(const LaunchConfig& config);

// The address that store listens on: the one its workers are given as
// MASTER_ADDR where ctrun knows it (one node: --local-addr, else
// --master-addr; several nodes: --local-addr when it is an IP address), else
// "" (every interface, as torch's TCPStore server binds).
std::string AgentStoreHost(const LaunchConfig& config);

// The rendezvous machine's parameters from --nnodes MIN:MAX and the
// --rdzv-conf timeouts (every backend that runs the machine uses these).
// InvalidArgument, naming the setting, when rdzv::ValidateParams refuses them.
Result<rdzv::Params> MachineParams(const LaunchConfig& config);

}  // namespace ctrun::launcher
