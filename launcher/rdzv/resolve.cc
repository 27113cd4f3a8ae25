#include "launcher/rdzv/resolve.h"

#include <unistd.h>

#include <boost/asio/ip/address.hpp>

#include "launcher/net/local_address.h"

namespace ctrun::launcher {

RendezvousPlan ResolveLocal(const LaunchConfig& config) {
  RendezvousPlan plan;
  plan.kind = HandlerKind::kLocal;
  plan.run_id = config.rdzv_id;
  plan.local_world_size = config.nproc_per_node;
  plan.master_addr = config.local_addr.value_or(config.master_addr);
  plan.master_port = config.master_port_given ? config.master_port : 0;
  return plan;
}

rdzv::NodeId ThisNode(const LaunchConfig& config) {
  return rdzv::NodeId{config.local_addr.value_or(HostName()), ::getpid(), 0};
}

std::optional<int> AgentStorePort(const LaunchConfig& config) {
  if (config.no_agent_store) return std::nullopt;
  if (config.local_rendezvous()) return config.master_port_given ? config.master_port : 0;
  if (config.rdzv_backend == RdzvBackend::kStatic) {
    if (config.node_rank != 0) return std::nullopt;
    return config.master_port;
  }
  return 0;
}

std::string AgentStoreHost(const LaunchConfig& config) {
  if (config.local_rendezvous()) return config.local_addr.value_or(config.master_addr);
  // A name can resolve here to another address than on the other nodes
  // (Debian maps the host name to 127.0.1.1 in /etc/hosts): bind a name's
  // every interface, an IP address only itself.
  boost::system::error_code ec;
  if (config.local_addr) boost::asio::ip::make_address(*config.local_addr, ec);
  return config.local_addr && !ec ? *config.local_addr : std::string();
}

}  // namespace ctrun::launcher
