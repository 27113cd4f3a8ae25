// The multi-node half of MakeRendezvous (rendezvous_setup.h): the agent's
// gRPC rendezvous, hosted here or joined.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "base/result.h"
#include "launcher/config.h"
#include "launcher/rendezvous_handler.h"

namespace ctrun::launcher {

// --rdzv-backend c10d or static with more than one node: see rendezvous_setup.h.
Result<std::unique_ptr<RendezvousHandler>> MakeGrpcRendezvous(boost::asio::io_context& io,
                                                              const LaunchConfig& config,
                                                              const Environment& env,
                                                              const StoreHosting& store);

}  // namespace ctrun::launcher
