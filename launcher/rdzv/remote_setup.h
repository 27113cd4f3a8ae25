// The rendezvous of a launch of several nodes: gRPC (c10d, static) and
// etcd-v3. MakeRendezvous (setup.h) calls it for every launch with more than
// one node, and for one node with c10d and an explicit --rdzv-endpoint
// (LaunchConfig::local_rendezvous).
//
// ctrun comes as two programs built from the same sources (docs/architecture.md,
// "Two binaries"): `ctrun`, which runs a one-node launch itself and links
// neither gRPC nor protobuf nor OpenSSL (their static initialisers and page
// faults were most of a launch's fixed cost), and `ctrun-full`, the whole
// launcher. `ctrun` hands those launches, and `ctrun status`, to
// `ctrun-full` beside it (launcher/app/handoff.h) before it starts anything. So
// this function has two definitions: remote_setup.cc (ctrun-full: library
// ctrun_launcher_rdzv_remote) and remote_absent.cc (ctrun: a refusal that a
// correct hand-off never reaches).
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "launcher/rdzv/resolve.h"

namespace ctrun::launcher {

// Routes gRPC's logs to spdlog and configures gRPC for this process
// (rendezvous/grpc/net/grpc_process.h), resolves `config` (ResolveRendezvous)
// and builds its gRPC or etcd-v3 handler, hosting the rendezvous server here
// when the plan says so. Errors as MakeRendezvous says.
Result<std::unique_ptr<RendezvousHandler>> MakeRemoteRendezvous(boost::asio::io_context& io,
                                                                const LaunchConfig& config,
                                                                const Environment& env,
                                                                const StoreHosting& store);

}  // namespace ctrun::launcher
