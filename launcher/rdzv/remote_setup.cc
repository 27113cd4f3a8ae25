// MakeRemoteRendezvous (remote_setup.h) in ctrun-full: the gRPC and etcd-v3
// handlers, and the rendezvous server an agent hosts.
#include "launcher/rdzv/remote_setup.h"

#include <spdlog/spdlog.h>

#include "launcher/rdzv/etcd_rendezvous.h"
#include "launcher/rdzv/grpc_rendezvous.h"
#include "launcher/rdzv/host_server.h"
#include "rendezvous/grpc/net/grpc_process.h"

namespace ctrun::launcher {

namespace {

Result<std::unique_ptr<RendezvousHandler>> MakeGrpc(boost::asio::io_context& io, RendezvousPlan plan,
                                                    const StoreHosting& store) {
  std::unique_ptr<HostedServer> hosted;
  if (plan.host) {
    Result<std::unique_ptr<HostedServer>> server = HostRendezvousServer(plan, *plan.host);
    if (!server.ok()) return server.status();
    hosted = std::move(*server);
  }
  if (!hosted) spdlog::info("joining the rendezvous at {} (served by another agent or ctrund)", plan.endpoint);
  GrpcRendezvousOptions o;
  o.client.endpoint = plan.endpoint;
  o.client.run_id = plan.run_id;
  o.client.node = plan.node;
  o.client.incarnation = plan.incarnation;
  o.client.params = plan.params;
  o.client.token = plan.token;
  o.client.tls = plan.tls;
  o.hint_rank = plan.hint_rank;
  o.local_world_size = plan.local_world_size;
  o.advertise_addr = plan.advertise_addr;
  o.fixed_master = plan.fixed_master;
  o.store = store;
  o.join_timeout = plan.join_timeout;
  o.close_timeout = plan.close_timeout;
  o.exit_barrier_timeout = plan.exit_barrier_timeout;
  return std::unique_ptr<RendezvousHandler>(std::make_unique<GrpcRendezvous>(io, std::move(o), std::move(hosted)));
}

Result<std::unique_ptr<RendezvousHandler>> MakeEtcd(boost::asio::io_context& io, const RendezvousPlan& plan,
                                                    const StoreHosting& store) {
  EtcdRendezvousOptions o;
  o.run_id = plan.run_id;
  o.store = store;
  o.node = plan.node;
  o.incarnation = plan.incarnation;
  o.params = plan.params;
  o.hint_rank = plan.hint_rank;
  o.local_world_size = plan.local_world_size;
  o.addr = plan.advertise_addr;
  o.join_timeout = plan.join_timeout;
  o.close_timeout = plan.close_timeout;
  return MakeEtcdRendezvous(io, plan.endpoint, std::move(o));
}

}  // namespace

Result<std::unique_ptr<RendezvousHandler>> MakeRemoteRendezvous(boost::asio::io_context& io,
                                                                const LaunchConfig& config,
                                                                const Environment& env,
                                                                const StoreHosting& store) {
  rdzv::RouteGrpcLogsToSpdlog();
  rdzv::ConfigureGrpcProcess();
  // Said before any other etcd-v3 problem: nothing else can be fixed first.
  if (config.rdzv_backend == RdzvBackend::kEtcdV3) CTRUN_RETURN_IF_ERROR(EtcdSupport());
  Result<RendezvousPlan> plan = ResolveRendezvous(config, env);
  if (!plan.ok()) return plan.status();
  switch (plan->kind) {
    case HandlerKind::kLocal:
      return Status::Internal("a one-node plan reached the remote rendezvous setup");
    case HandlerKind::kGrpc:
      return MakeGrpc(io, *plan, store);
    case HandlerKind::kEtcd:
      return MakeEtcd(io, *plan, store);
  }
  return Status::Internal("unknown rendezvous handler kind");
}

}  // namespace ctrun::launcher
