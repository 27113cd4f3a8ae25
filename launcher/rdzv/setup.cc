#include "launcher/rdzv/setup.h"

#include "launcher/rdzv/local_rendezvous.h"
#include "launcher/rdzv/remote_setup.h"

namespace ctrun::launcher {

namespace {

std::unique_ptr<RendezvousHandler> MakeLocal(boost::asio::io_context& io, const RendezvousPlan& plan,
                                             const StoreHosting& store) {
  int fixed_port = plan.master_port;
  if (store.agent_store && store.port) fixed_port = *store.port;
  return std::make_unique<LocalRendezvous>(io, plan.run_id, plan.local_world_size, plan.master_addr, fixed_port,
                                           store.agent_store);
}

}  // namespace

Result<std::unique_ptr<RendezvousHandler>> MakeRendezvous(boost::asio::io_context& io,
                                                          const LaunchConfig& config,
                                                          const Environment& env,
                                                          const StoreHosting& store) {
  if (!config.local_rendezvous()) return MakeRemoteRendezvous(io, config, env, store);
  return std::unique_ptr<RendezvousHandler>(MakeLocal(io, ResolveLocal(config), store));
}

}  // namespace ctrun::launcher
