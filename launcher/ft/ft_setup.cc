// StartFaultTolerance (ft_setup.h) in ctrun-full.
#include "launcher/ft/ft_setup.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <random>

#include "launcher/ft/relay.h"
#include "launcher/net/local_address.h"
#include "launcher/rdzv/host_server.h"
#include "launcher/rdzv/resolve.h"
#include "rendezvous/grpc/client/ft_client.h"
#include "rendezvous/grpc/net/grpc_process.h"

namespace ctrun::launcher {
namespace {

// The relay's FtQuorumLink over the gRPC client.
class ClientLink : public FtQuorumLink {
 public:
  explicit ClientLink(rdzv::FtClient& client) : client_(client) {}
  void Sync(const rdzv::SyncCall& call, int part,
            std::function<void(const Result<rdzv::SyncAnswer>&)> done) override {
    client_.Sync(call, part, std::move(done));
  }
  void Leave(const std::string& reason) override {
    client_.Leave(reason, std::chrono::seconds(10), [](const Status& s) {
      if (!s.ok()) spdlog::warn("could not tell the quorum server this group left: {}", s.message());
    });
  }
  void Finished(int64_t step, std::function<void()> done) override {
    client_.Leave(
        "its workers finished training", std::chrono::seconds(10),
        [done = std::move(done)](const Status& s) {
          if (!s.ok()) spdlog::warn("could not tell the quorum server this group finished: {}", s.message());
          done();
        },
        step);
  }

 private:
  rdzv::FtClient& client_;
};

class Runtime : public FtRuntime {
 public:
  const std::vector<std::pair<std::string, std::string>>& worker_env() const override { return env_; }
  void OnRound(int group_rank) override { relay->SetPart(group_rank); }

  // Declared in the order they are made; destroyed in reverse (the relay
  // first, the server last).
  std::unique_ptr<HostedServer> server;
  std::unique_ptr<rdzv::FtClient> client;
  std::unique_ptr<ClientLink> link;
  std::unique_ptr<FtRelay> relay;
  std::unique_ptr<boost::asio::steady_timer> rewatch;  // opens the watch again (OpenWatch)
  std::vector<std::pair<std::string, std::string>> env_;

  ~Runtime() override {
    rewatch.reset();  // its pending wait ends with operation_aborted
    relay.reset();
    link.reset();
    client.reset();  // ends the watch: the server takes the group as lost
    if (server) server->Stop();
  }
};

std::string RandomHex() {
  std::random_device rd;
  return fmt::format("{:08x}", rd());
}

// The numeric address other groups reach this node at: --local-addr when it
// is one, else the source address toward the quorum server.
Result<std::string> ReachableHost(const LaunchConfig& config) {
  if (config.local_addr && !config.local_addr->empty()) {
    const std::string& a = *config.local_addr;
    if (a.find_first_not_of("0123456789.") == std::string::npos || a.find(':') != std::string::npos) return a;
  }
  Result<std::string> host = SourceAddressToward(config.rdzv_host, config.rdzv_port == 0 ? 1 : config.rdzv_port);
  if (!host.ok()) return Status::Unavailable("--ft-replicas: " + host.status().message());
  return host;
}

// Opens the group's watch. A watch that ends Unavailable (the server's
// connection broke: a partition that healed, a ctrund restarted) is opened
// again a second later (the call waits for the server to be reachable), so
// the group heartbeats and hears of lost members again; without it, a group
// that came back would train on unwatched. Any other end (a refusal) is
// left as it is. The callbacks run on io's thread, never after `rt` is gone
// (destroying the client makes them stale).
void OpenWatch(Runtime& rt, const std::string& group, bool again) {
  FtRelay* relay = rt.relay.get();
  rt.client->Watch(
      [relay](const std::string& lost, int64_t quorum_id, const std::string& reason) {
        relay->OnLost(lost, quorum_id, reason);
      },
      [&rt, group](const Status& s) {
        if (s.ok()) return;
        spdlog::warn("the quorum server's watch of this group ended: {}", s.message());
        if (!s.IsUnavailable()) return;
        rt.rewatch->expires_after(std::chrono::seconds(1));
        rt.rewatch->async_wait([&rt, group](const boost::system::error_code& ec) {
          if (!ec) OpenWatch(rt, group, /*again=*/true);
        });
      },
      [group, again] {
        if (again) spdlog::info("the quorum server watches replica group {} again", group);
      });
}

}  // namespace

Result<std::unique_ptr<FtRuntime>> StartFaultTolerance(boost::asio::io_context& io, const LaunchConfig& config,
                                                       const Environment& env, EventLog* events) {
  rdzv::RouteGrpcLogsToSpdlog();
  rdzv::ConfigureGrpcProcess();
  LaunchConfig quorum = config;
  quorum.ft.reset();  // as a one-node c10d launch with this endpoint: the same hosting and credentials
  Result<RendezvousPlan> plan = ResolveRendezvous(quorum, env);
  if (!plan.ok()) return plan.status();
  Result<std::string> host = ReachableHost(config);
  if (!host.ok()) return host.status();

  auto rt = std::make_unique<Runtime>();
  if (plan->host) {
    Result<std::unique_ptr<HostedServer>> server = HostRendezvousServer(*plan, *plan->host);
    if (!server.ok()) return server.status();
    rt->server = std::move(*server);
  }
  if (!rt->server) spdlog::info("joining the quorum at {} (served by another agent or ctrund)", plan->endpoint);
  const std::string node = rdzv::ToString(plan->node);
  const int parts = config.ft->group_size;
  const std::string group = parts > 1 ? config.ft->group_id() : node;
  rdzv::FtClientOptions o;
  o.endpoint = plan->endpoint;
  o.run_id = plan->run_id;
  o.group = group;
  o.parts = parts;
  o.node = parts > 1 ? node : "";
  o.token = plan->token;
  o.tls = plan->tls;
  // A group waits for its quorum (a peer's step included) no longer than a
  // c10d node waits for its round: a wrong endpoint, or fewer than MIN
  // groups, ends the workers with one line instead of a hang.
  o.sync_timeout = ToDuration(config.rdzv_conf.join_timeout);
  // Only this group's part of each quorum, not every group's address
  // (group_sync.h): enough heal sources for each of its ranks.
  o.compact_sources = FtCompactSources(config.nproc_per_node, parts);
  o.params = rdzv::QuorumParams{.min_replicas = config.ft->min_replicas,
                                .max_replicas = config.ft->max_replicas,
                                .join_timeout = ToDuration(config.ft_join_timeout),
                                .heartbeat_timeout = std::chrono::seconds(5)};
  rt->client = std::make_unique<rdzv::FtClient>(
      o, [&io](std::function<void()> fn) { boost::asio::post(io, std::move(fn)); });
  rt->link = std::make_unique<ClientLink>(*rt->client);
  FtRelayOptions ro{.group = group,
                    .host = *host,
                    .nproc = config.nproc_per_node,
                    .parts = parts,
                    .socket_name = fmt::format("ctrun-ft-{}-{}", ::getpid(), RandomHex()),
                    .endpoint = plan->endpoint,
                    .run_id = plan->run_id,
                    .min_groups = config.ft->min_replicas,
                    .give_up_after = *o.sync_timeout};
  if (ro.nproc > kFtMaxLocalRanks) {
    return Status::InvalidArgument(fmt::format(
        "--nproc-per-node {} with --ft-replicas: at most {} workers per node take part in a quorum",
        ro.nproc, kFtMaxLocalRanks));
  }
  rt->relay = std::make_unique<FtRelay>(io, ro, *rt->link, events);
  CTRUN_RETURN_IF_ERROR(rt->relay->Listen());
  FtRelay* relay = rt->relay.get();
  rt->rewatch = std::make_unique<boost::asio::steady_timer>(io);
  OpenWatch(*rt, group, /*again=*/false);
  rt->env_ = {{"CTRUN_FT_SOCKET", relay->socket_env()},
              {"CTRUN_FT_GROUP", group},
              {"CTRUN_FT_HOST", *host},
              {"CTRUN_FT_REPLICAS", fmt::format("{}:{}", config.ft->min_replicas, config.ft->max_replicas)}};
  if (config.ft_exact) rt->env_.emplace_back("CTRUN_FT_EXACT", "1");
  spdlog::info("replica group {} ({} workers at {}{}) trains in a quorum of {} to {} groups served at {}", group,
               ro.nproc, *host, parts > 1 ? fmt::format(", one of its {} nodes", parts) : "",
               config.ft->min_replicas, config.ft->max_replicas, plan->endpoint);
  return std::unique_ptr<FtRuntime>(std::move(rt));
}

}  // namespace ctrun::launcher
