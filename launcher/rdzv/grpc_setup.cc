#include "launcher/rdzv/grpc_setup.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <random>

#include "launcher/rdzv/etcd_rendezvous.h"
#include "launcher/rdzv/grpc_rendezvous.h"
#include "launcher/net/local_address.h"
#include "launcher/rdzv/setup.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/grpc/grpc_process.h"
#include "rendezvous/grpc/server.h"

namespace ctrun::launcher {

namespace {

bool IsIpV6Literal(const std::string& host) {
  in6_addr a;
  return inet_pton(AF_INET6, host.c_str(), &a) == 1;
}

bool IsIpLiteral(const std::string& host) {
  in_addr a;
  return inet_pton(AF_INET, host.c_str(), &a) == 1 || IsIpV6Literal(host);
}

std::string Endpoint(const std::string& host, int port) {
  return (IsIpV6Literal(host) ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

class ServerHandle : public HostedServer {
 public:
  ServerHandle(std::unique_ptr<rdzv::RendezvousServer> server, std::string run_id)
      : server_(std::move(server)), run_id_(std::move(run_id)) {}
  void Stop() override { server_->Shutdown(); }
  void WhenDrained(std::function<void()> cb) override { server_->WhenDrained(run_id_, std::move(cb)); }

 private:
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::string run_id_;
};

}  // namespace

// token_file wins over $CTRUN_RDZV_TOKEN; read the same way as ctrund's.
Result<std::string> RendezvousToken(const LaunchConfig& config, const Environment& env) {
  if (config.rdzv_conf.token_file) return rdzv::ReadTokenFile(*config.rdzv_conf.token_file, "--rdzv-conf token_file");
  auto it = env.find("CTRUN_RDZV_TOKEN");
  std::string token = it == env.end() ? std::string() : it->second;
  CTRUN_RETURN_IF_ERROR(rdzv::CheckToken(token, "CTRUN_RDZV_TOKEN"));
  return token;
}

Result<rdzv::TlsConfig> RendezvousTls(const RdzvConf& conf) {
  rdzv::TlsFiles files;
  files.cert = conf.tls_cert;
  files.key = conf.tls_key;
  files.ca = conf.tls_ca;
  files.server_name = conf.tls_server_name;
  files.cert_flag = "--rdzv-conf tls_cert";
  files.key_flag = "--rdzv-conf tls_key";
  files.ca_flag = "--rdzv-conf tls_ca";
  if (files.Any() && files.ca.empty()) {
    return Status::InvalidArgument(
        "--rdzv-conf tls_cert/tls_key without tls_ca: every node needs tls_ca (the CA that signed the "
        "rendezvous server's certificate) to verify the server");
  }
  if (!conf.tls_server_name.empty() && files.ca.empty()) {
    return Status::InvalidArgument("--rdzv-conf tls_server_name without tls_ca: give tls_ca as well (TLS is off)");
  }
  return rdzv::LoadTls(files);
}

Result<std::unique_ptr<RendezvousHandler>> MakeGrpcRendezvous(boost::asio::io_context& io,
                                                              const LaunchConfig& config,
                                                              const Environment& env,
                                                              const StoreHosting& store) {
  rdzv::RouteGrpcLogsToSpdlog();
  rdzv::ConfigureGrpcProcess();
  if (config.rdzv_backend == RdzvBackend::kEtcdV3) return MakeEtcdRendezvous(io, config, store);
  const bool is_static = config.rdzv_backend == RdzvBackend::kStatic;
  if (!is_static && config.rdzv_backend != RdzvBackend::kC10d) {
    return Status::InvalidArgument(
        "--rdzv-backend etcd: ctrun does not speak etcd's rendezvous; use --rdzv-backend c10d "
        "(ctrun's gRPC rendezvous) with --rdzv-endpoint HOST:PORT");
  }

  std::string host = config.rdzv_host;
  int port = config.rdzv_port;
  std::optional<int> hint;
  bool host_it;
  bool inferred = !config.rdzv_conf.is_host.has_value();
  if (is_static) {
    if (config.min_nodes != config.max_nodes) {
      return Status::InvalidArgument("--nnodes " + std::to_string(config.min_nodes) + ":" +
                                     std::to_string(config.max_nodes) +
                                     ": the static backend has fixed membership; give one number, "
                                     "or use --rdzv-backend c10d for MIN:MAX");
    }
    if (config.rdzv_endpoint.empty()) {
      host = config.master_addr;
      port = config.master_port + 1;
    }
    hint = config.node_rank;
    host_it = config.rdzv_conf.is_host.value_or(config.node_rank == 0);
  } else {
    if (config.rdzv_endpoint.empty()) {
      return Status::InvalidArgument(
          "--rdzv-backend c10d with --nnodes " + std::to_string(config.max_nodes) +
          " needs --rdzv-endpoint HOST[:PORT] (the same on every node)");
    }
    if (port == 0) port = 29400;
    if (config.node_rank_given) hint = config.node_rank;
    host_it = config.rdzv_conf.is_host.value_or(IsLocalHost(host));
  }

  Result<std::string> token = RendezvousToken(config, env);
  if (!token.ok()) return token.status();
  Result<rdzv::TlsConfig> tls = RendezvousTls(config.rdzv_conf);
  if (!tls.ok()) return tls.status();

  Result<rdzv::Params> machine_params = MachineParams(config);
  if (!machine_params.ok()) return machine_params.status();
  const rdzv::Params& params = *machine_params;

  std::unique_ptr<HostedServer> hosted;
  const std::string endpoint = Endpoint(host, port);
  // A node with tls_ca but no certificate of its own cannot serve TLS: it
  // only joins, unless it was told to host.
  if (tls->ClientSide() && !tls->ServerSide() && inferred) host_it = false;
  if (host_it) {
    rdzv::ServerOptions so;
    so.listen_address = IsIpLiteral(host) ? endpoint : "0.0.0.0:" + std::to_string(port);
    so.mode = rdzv::RunRegistry::Mode::kFixed;
    so.runs = {rdzv::FixedRun{config.rdzv_id, params}};
    so.token = *token;
    so.tls = *tls;
    so.tls.ca_pem.clear();  // an agent-hosted server does not ask for client certificates (ctrund can)
    if (tls->ClientSide() && !tls->ServerSide()) {
      return Status::InvalidArgument("--rdzv-conf tls_ca without tls_cert and tls_key: this node hosts the "
                                     "rendezvous (" + endpoint + ") and needs its certificate and key to serve TLS");
    }
    Result<std::unique_ptr<rdzv::RendezvousServer>> server = rdzv::RendezvousServer::Start(so);
    if (server.ok()) {
      spdlog::info("hosting the rendezvous for run '{}' on {}", config.rdzv_id, so.listen_address);
      hosted = std::make_unique<ServerHandle>(std::move(*server), config.rdzv_id);
    } else if (inferred) {
      spdlog::info("the rendezvous at {} is hosted by another agent ({}); joining it",
                   endpoint, server.status().message());
    } else {
      return Status::Unavailable("--rdzv-conf is_host=1: " + server.status().message());
    }
  }

  GrpcRendezvousOptions o;
  o.client.endpoint = endpoint;
  o.client.run_id = config.rdzv_id;
  o.client.node = rdzv::NodeId{config.local_addr.value_or(HostName()), ::getpid(), 0};
  o.client.incarnation = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
  o.client.params = params;
  o.client.token = *token;
  o.client.tls = *tls;
  o.hint_rank = hint;
  o.local_world_size = config.nproc_per_node;
  o.advertise_addr = config.local_addr.value_or("");
  if (is_static) o.fixed_master = std::make_pair(config.master_addr, config.master_port);
  o.store = store;
  o.join_timeout = config.rdzv_conf.join_timeout;
  o.close_timeout = config.rdzv_conf.close_timeout;
  o.exit_barrier_timeout = config.exit_barrier_timeout;
  return std::unique_ptr<RendezvousHandler>(
      std::make_unique<GrpcRendezvous>(io, std::move(o), std::move(hosted)));
}

}  // namespace ctrun::launcher
