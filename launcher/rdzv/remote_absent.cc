// MakeRemoteRendezvous (remote_setup.h) in the one-node `ctrun`: main hands
// every launch of several nodes to ctrun-full before it gets here.
#include "launcher/rdzv/remote_setup.h"

namespace ctrun::launcher {

Result<std::unique_ptr<RendezvousHandler>> MakeRemoteRendezvous(boost::asio::io_context&,
                                                                const LaunchConfig& config,
                                                                const Environment&,
                                                                const StoreHosting&) {
  return Status::FailedPrecondition("--nnodes " + std::to_string(config.max_nodes) +
                                    ": this program runs one-node launches only; run ctrun-full");
}

}  // namespace ctrun::launcher
