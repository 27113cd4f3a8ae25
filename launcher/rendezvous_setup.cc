#include "launcher/rendezvous_setup.h"

#include "launcher/grpc_rendezvous_setup.h"
#include "launcher/local_rendezvous.h"

namespace ctrun::launcher {

Result<std::unique_ptr<RendezvousHandler>> MakeRendezvous(boost::asio::io_context& io,
                                                          const LaunchConfig& config,
                                                          const Environment& env) {
  if (config.is_single_node()) {
    const std::string master_addr = config.local_addr.value_or(config.master_addr);
    const int fixed_port = config.master_port_given ? config.master_port : 0;
    return std::unique_ptr<RendezvousHandler>(std::make_unique<LocalRendezvous>(
        io, config.rdzv_id, config.nproc_per_node, master_addr, fixed_port));
  }
  return MakeGrpcRendezvous(io, config, env);
}

}  // namespace ctrun::launcher
