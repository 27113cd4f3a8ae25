// The rendezvous setup: this node's RendezvousHandler from the LaunchConfig,
// in two one-way steps. ResolveRendezvous (launcher/rdzv/resolve.h) turns
// the config into a RendezvousPlan once; MakeRendezvous builds the plan's
// handler (LocalRendezvous, GrpcRendezvous hosting its server here when the
// plan says so, EtcdRendezvous). One node: ResolveLocal and LocalRendezvous
// here; several (or c10d with an explicit --rdzv-endpoint, see
// LaunchConfig::local_rendezvous): MakeRemoteRendezvous (remote_setup.h),
// which the one-node `ctrun` does not link. resolve.h is included for main's use:
// AgentStorePort and AgentStoreHost say where the workers' store binds.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "launcher/rdzv/resolve.h"

namespace ctrun::launcher {

// Resolves `config` (see resolve.h for the backends) and builds the handler.
// With more than one node, first routes gRPC's logs to spdlog and configures
// gRPC for this process (rendezvous/grpc/net/grpc_process.h).
// Errors: InvalidArgument as ResolveRendezvous, or for an etcd-v3 backend in
// a ctrun built without etcd; FailedPrecondition for several nodes in the
// one-node `ctrun` (main hands those to ctrun-full first); Unavailable when is_host=1 was given and the
// server cannot listen, or etcd cannot be reached.
// `store` says who hosts the workers' store (see AgentStorePort); `io` must
// outlive the handler.
Result<std::unique_ptr<RendezvousHandler>> MakeRendezvous(boost::asio::io_context& io,
                                                          const LaunchConfig& config,
                                                          const Environment& env,
                                                          const StoreHosting& store);

}  // namespace ctrun::launcher
