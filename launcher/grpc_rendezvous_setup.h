// The multi-node half of MakeRendezvous (rendezvous_setup.h), built into the
// plugin libctrun_multinode.so so that single-node runs never load gRPC
// (loading it costs ~5 ms of every start). ctrun dlopens the plugin and calls
// ctrun_make_grpc_rendezvous; both sides are built from this tree, with the
// same compiler, so the arguments are plain C++ objects.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "base/result.h"
#include "launcher/config.h"
#include "launcher/rendezvous_handler.h"

namespace ctrun::launcher {

struct MultiNodeArgs {
  boost::asio::io_context* io;
  const LaunchConfig* config;
  const Environment* env;
};

struct MultiNodeResult {
  std::unique_ptr<RendezvousHandler> handler;  // set on success
  Status status;                               // set on failure
};

// --rdzv-backend c10d or static with more than one node: see rendezvous_setup.h.
Result<std::unique_ptr<RendezvousHandler>> MakeGrpcRendezvous(boost::asio::io_context& io,
                                                              const LaunchConfig& config,
                                                              const Environment& env);

// The plugin's entry point, looked up by name.
inline constexpr char kMultiNodeEntry[] = "ctrun_make_grpc_rendezvous";
using MultiNodeEntry = void (*)(const MultiNodeArgs*, MultiNodeResult*);

}  // namespace ctrun::launcher

extern "C" void ctrun_make_grpc_rendezvous(const ctrun::launcher::MultiNodeArgs* args,
                                           ctrun::launcher::MultiNodeResult* result);
