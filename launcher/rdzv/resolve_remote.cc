// ResolveRendezvous (resolve.h): the plan of a launch of several nodes,
// gRPC (c10d, static) or etcd-v3. Only in ctrun-full: it reads the token and
// TLS files with rendezvous/grpc's credentials (launcher/rdzv/remote_setup.h).
#include <arpa/inet.h>

#include <random>

#include "launcher/net/local_address.h"
#include "launcher/rdzv/credentials.h"
#include "launcher/rdzv/resolve.h"

namespace ctrun::launcher {

namespace {

// --rdzv-endpoint HOST:0 on a node that does not host the rendezvous: there
// is no port to join.
Status PortZeroToJoin(const LaunchConfig& config) {
  return Status::InvalidArgument("--rdzv-endpoint '" + config.rdzv_endpoint +
                                 "': port 0 is only for the node that hosts the rendezvous (it binds a free port "
                                 "and logs it); give this node HOST:PORT with the port the host logged");
}

bool IsIpV6Literal(const std::string& host) {
  in6_addr a;
  return inet_pton(AF_INET6, host.c_str(), &a) == 1;
}

bool IsIpLiteral(const std::string& host) {
  in_addr a;
  return inet_pton(AF_INET, host.c_str(), &a) == 1 || IsIpV6Literal(host);
}

std::string HostPort(const std::string& host, int port) {
  return (IsIpV6Literal(host) ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// The rendezvous machine's parameters from --nnodes MIN:MAX and the
// --rdzv-conf timeouts (every backend that runs the machine uses these).
Result<rdzv::Params> MachineParams(const LaunchConfig& config) {
  rdzv::Params params;
  params.min_nodes = config.min_nodes;
  params.max_nodes = config.max_nodes;
  params.join_timeout = ToDuration(config.rdzv_conf.join_timeout);
  params.last_call_timeout = ToDuration(config.rdzv_conf.last_call_timeout);
  params.close_timeout = ToDuration(config.rdzv_conf.close_timeout);
  params.keep_alive_interval = ToDuration(config.rdzv_conf.keep_alive_interval);
  params.keep_alive_max_attempt = config.rdzv_conf.keep_alive_max_attempt;
  params.max_unhealthy_nodes = config.max_unhealthy_nodes.value_or(-1);
  if (Status s = rdzv::ValidateParams(params); !s.ok()) return s;
  return params;
}

// What kGrpc and kEtcd share: the run, this node, the machine, the timeouts.
Result<RendezvousPlan> ResolveMember(const LaunchConfig& config, HandlerKind kind) {
  Result<rdzv::Params> params = MachineParams(config);
  if (!params.ok()) return params.status();
  RendezvousPlan plan;
  plan.kind = kind;
  // Under --ft-group-size, the group's own rendezvous (on ctrund).
  plan.run_id = config.ft && config.ft->group_size > 1 ? config.ft->group_run_id(config.rdzv_id) : config.rdzv_id;
  plan.local_world_size = config.nproc_per_node;
  plan.params = *params;
  plan.node = ThisNode(config);
  plan.incarnation = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
  if (config.node_rank_given) plan.hint_rank = config.node_rank;
  plan.join_timeout = config.rdzv_conf.join_timeout;
  plan.close_timeout = config.rdzv_conf.close_timeout;
  return plan;
}

// --rdzv-backend etcd-v3: the member at --rdzv-endpoint (the others are
// found through it).
Result<RendezvousPlan> ResolveEtcd(const LaunchConfig& config) {
  if (config.rdzv_port == 0) return PortZeroToJoin(config);  // ctrun never hosts etcd
  Result<RendezvousPlan> plan = ResolveMember(config, HandlerKind::kEtcd);
  if (!plan.ok()) return plan;
  std::string host = config.rdzv_host == "localhost" ? "127.0.0.1" : config.rdzv_host;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  plan->endpoint = host + ":" + std::to_string(config.rdzv_port);
  plan->advertise_addr = config.local_addr.value_or(HostName());
  return plan;
}

// Where the gRPC server is and whether this agent hosts it, before TLS has
// its say (see ResolveGrpc).
struct ServerSite {
  std::string host;
  int port = 0;
  bool host_it = false;
  bool inferred = false;  // host_it was not given as is_host
};

Result<ServerSite> ResolveServerSite(const LaunchConfig& config) {
  ServerSite site{config.rdzv_host, config.rdzv_port, false, !config.rdzv_conf.is_host.has_value()};
  if (config.rdzv_backend == RdzvBackend::kStatic) {
    if (config.min_nodes != config.max_nodes) {
      return Status::InvalidArgument("--nnodes " + std::to_string(config.min_nodes) + ":" +
                                     std::to_string(config.max_nodes) +
                                     ": the static backend has fixed membership; give one number, "
                                     "or use --rdzv-backend c10d for MIN:MAX");
    }
    if (config.rdzv_endpoint.empty()) {
      site.host = config.master_addr;
      site.port = config.master_port + 1;
    }
    site.host_it = config.rdzv_conf.is_host.value_or(config.node_rank == 0);
    return site;
  }
  if (config.rdzv_endpoint.empty()) {
    return Status::InvalidArgument("--rdzv-backend c10d with --nnodes " + std::to_string(config.max_nodes) +
                                   " needs --rdzv-endpoint HOST[:PORT] (the same on every node)");
  }
  site.host_it = config.rdzv_conf.is_host.value_or(IsLocalHost(site.host));
  return site;
}

// --rdzv-backend c10d (grpc) or static with several nodes.
Result<RendezvousPlan> ResolveGrpc(const LaunchConfig& config, const Environment& env) {
  Result<ServerSite> site = ResolveServerSite(config);
  if (!site.ok()) return site.status();
  Result<std::string> token = RendezvousToken(config, env);
  if (!token.ok()) return token.status();
  Result<rdzv::TlsConfig> tls = RendezvousTls(config.rdzv_conf);
  if (!tls.ok()) return tls.status();
  Result<RendezvousPlan> plan = ResolveMember(config, HandlerKind::kGrpc);
  if (!plan.ok()) return plan;

  plan->endpoint = HostPort(site->host, site->port);
  plan->advertise_addr = config.local_addr.value_or("");
  plan->token = std::move(*token);
  plan->tls = std::move(*tls);
  plan->exit_barrier_timeout = config.exit_barrier_timeout;
  if (config.rdzv_backend == RdzvBackend::kStatic) {
    plan->hint_rank = config.node_rank;  // group ranks are the node ranks
    plan->fixed_master = std::make_pair(config.master_addr, config.master_port);
  }
  // A node with tls_ca but no certificate of its own cannot serve TLS: it
  // only joins, unless it was told to host.
  const bool client_only = plan->tls.ClientSide() && !plan->tls.ServerSide();
  if (client_only && site->inferred) site->host_it = false;
  if (!site->host_it) {
    if (site->port == 0) return PortZeroToJoin(config);
    return plan;
  }
  if (client_only) {
    return Status::InvalidArgument("--rdzv-conf tls_ca without tls_cert and tls_key: this node hosts the "
                                   "rendezvous (" + plan->endpoint + ") and needs its certificate and key to serve TLS");
  }
  plan->host = HostPlan{IsIpLiteral(site->host) ? plan->endpoint : "0.0.0.0:" + std::to_string(site->port),
                        !site->inferred, config.rdzv_conf.metrics_port, config.port_sniff_deadline};
  return plan;
}

}  // namespace

Result<RendezvousPlan> ResolveRendezvous(const LaunchConfig& config, const Environment& env) {
  if (config.local_rendezvous()) return ResolveLocal(config);
  switch (config.rdzv_backend) {
    case RdzvBackend::kEtcdV3:
      return ResolveEtcd(config);
    case RdzvBackend::kStatic:
    case RdzvBackend::kC10d:
      return ResolveGrpc(config, env);
    case RdzvBackend::kEtcd:
    case RdzvBackend::kEtcdV2:
      break;
  }
  return Status::InvalidArgument(
      "--rdzv-backend etcd: ctrun does not speak etcd's rendezvous; use --rdzv-backend c10d "
      "(ctrun's gRPC rendezvous) with --rdzv-endpoint HOST:PORT");
}

}  // namespace ctrun::launcher
