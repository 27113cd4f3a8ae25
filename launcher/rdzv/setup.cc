#include "launcher/rdzv/setup.h"

#include <boost/asio/ip/address.hpp>
#include <chrono>

#include "launcher/rdzv/grpc_setup.h"
#include "launcher/rdzv/local_rendezvous.h"

namespace ctrun::launcher {

Result<std::unique_ptr<RendezvousHandler>> MakeRendezvous(boost::asio::io_context& io,
                                                          const LaunchConfig& config,
                                                          const Environment& env,
                                                          const StoreHosting& store) {
  if (config.is_single_node()) {
    const std::string master_addr = config.local_addr.value_or(config.master_addr);
    int fixed_port = config.master_port_given ? config.master_port : 0;
    if (store.agent_store && store.port) fixed_port = *store.port;
    return std::unique_ptr<RendezvousHandler>(std::make_unique<LocalRendezvous>(
        io, config.rdzv_id, config.nproc_per_node, master_addr, fixed_port, store.agent_store));
  }
  return MakeGrpcRendezvous(io, config, env, store);
}

std::optional<int> AgentStorePort(const LaunchConfig& config) {
  if (config.no_agent_store) return std::nullopt;
  if (config.is_single_node()) return config.master_port_given ? config.master_port : 0;
  if (config.rdzv_backend == RdzvBackend::kStatic) {
    if (config.node_rank != 0) return std::nullopt;
    return config.master_port;
  }
  return 0;
}

std::string AgentStoreHost(const LaunchConfig& config) {
  if (config.is_single_node()) return config.local_addr.value_or(config.master_addr);
  // A name can resolve here to another address than on the other nodes
  // (Debian maps the host name to 127.0.1.1 in /etc/hosts): bind a name's
  // every interface, an IP address only itself.
  boost::system::error_code ec;
  if (config.local_addr) boost::asio::ip::make_address(*config.local_addr, ec);
  return config.local_addr && !ec ? *config.local_addr : std::string();
}

Result<rdzv::Params> MachineParams(const LaunchConfig& config) {
  auto ToDuration = [](Seconds s) { return std::chrono::duration_cast<Duration>(s); };
  rdzv::Params params;
  params.min_nodes = config.min_nodes;
  params.max_nodes = config.max_nodes;
  params.join_timeout = ToDuration(config.rdzv_conf.join_timeout);
  params.last_call_timeout = ToDuration(config.rdzv_conf.last_call_timeout);
  params.close_timeout = ToDuration(config.rdzv_conf.close_timeout);
  params.keep_alive_interval = ToDuration(config.rdzv_conf.keep_alive_interval);
  params.keep_alive_max_attempt = config.rdzv_conf.keep_alive_max_attempt;
  if (Status s = rdzv::ValidateParams(params); !s.ok()) return s;
  return params;
}

}  // namespace ctrun::launcher
