// ResolveRendezvous: a command line -> the one RendezvousPlan the setup
// builds a handler from. Addresses are loopback or TEST-NET-1 (192.0.2.0/24,
// never routed): resolving a plan opens no connection.
#include "launcher/rdzv/resolve.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "launcher/cli/config.h"

namespace ctrun::launcher {
namespace {

LaunchConfig Parse(std::vector<std::string> args) {
  args.push_back("train.py");
  Result<ParsedArgs> parsed = ParseCommandLine(args, {});
  REQUIRE(parsed.ok());
  return parsed->config;
}

Result<RendezvousPlan> Resolve(std::vector<std::string> args) { return ResolveRendezvous(Parse(std::move(args)), {}); }

TEST_CASE("One node resolves to the local rendezvous") {
  Result<RendezvousPlan> plan = Resolve({"--nproc-per-node", "3", "--master-port", "29611"});
  REQUIRE(plan.ok());
  CHECK(plan->kind == HandlerKind::kLocal);
  CHECK(plan->local_world_size == 3);
  CHECK(plan->master_port == 29611);
  CHECK_FALSE(plan->host.has_value());
}

TEST_CASE("c10d at a local address: this agent hosts the server, not required") {
  Result<RendezvousPlan> plan =
      Resolve({"--nnodes", "2:4", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29555", "--rdzv-id", "j"});
  REQUIRE(plan.ok());
  CHECK(plan->kind == HandlerKind::kGrpc);
  CHECK(plan->run_id == "j");
  CHECK(plan->endpoint == "127.0.0.1:29555");
  CHECK(plan->params.min_nodes == 2);
  CHECK(plan->params.max_nodes == 4);
  REQUIRE(plan->host.has_value());
  CHECK(plan->host->listen_address == "127.0.0.1:29555");
  CHECK_FALSE(plan->host->required);
  CHECK_FALSE(plan->fixed_master.has_value());
}

TEST_CASE("c10d at another host's address: join only, default port 29400") {
  Result<RendezvousPlan> plan = Resolve({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "192.0.2.1"});
  REQUIRE(plan.ok());
  CHECK(plan->endpoint == "192.0.2.1:29400");
  CHECK_FALSE(plan->host.has_value());
  CHECK_FALSE(plan->hint_rank.has_value());
}

TEST_CASE("is_host=1 makes hosting required, on the endpoint's IP") {
  Result<RendezvousPlan> plan = Resolve({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                         "192.0.2.1:29556", "--rdzv-conf", "is_host=1", "--node-rank", "1"});
  REQUIRE(plan.ok());
  REQUIRE(plan->host.has_value());
  CHECK(plan->host->listen_address == "192.0.2.1:29556");
  CHECK(plan->host->required);
  CHECK(plan->hint_rank == 1);
}

TEST_CASE("metrics_port reaches the hosting plan only") {
  Result<RendezvousPlan> hosting = Resolve({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                            "127.0.0.1:29557", "--rdzv-conf", "metrics_port=0"});
  REQUIRE(hosting.ok());
  REQUIRE(hosting->host.has_value());
  CHECK(hosting->host->metrics_port == 0);
  Result<RendezvousPlan> plain =
      Resolve({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29557"});
  REQUIRE(plain.ok());
  REQUIRE(plain->host.has_value());
  CHECK_FALSE(plain->host->metrics_port.has_value());
  // The agent that only joins has no host plan: the key is ignored there.
  Result<RendezvousPlan> joining = Resolve({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                            "192.0.2.1:29557", "--rdzv-conf", "metrics_port=9464"});
  REQUIRE(joining.ok());
  CHECK_FALSE(joining->host.has_value());
}

TEST_CASE("The static backend: node rank 0 hosts at master port + 1, workers get the master exactly") {
  Result<RendezvousPlan> plan = Resolve({"--nnodes", "2", "--rdzv-backend", "static", "--master-addr", "127.0.0.1",
                                         "--master-port", "29600", "--node-rank", "0"});
  REQUIRE(plan.ok());
  CHECK(plan->kind == HandlerKind::kGrpc);
  CHECK(plan->endpoint == "127.0.0.1:29601");
  CHECK(plan->hint_rank == 0);
  REQUIRE(plan->fixed_master.has_value());
  CHECK(plan->fixed_master->first == "127.0.0.1");
  CHECK(plan->fixed_master->second == 29600);
  CHECK(plan->host.has_value());
}

TEST_CASE("Combinations the backend cannot serve are one-line errors naming the flag") {
  Result<RendezvousPlan> plan = Resolve({"--nnodes", "2:3", "--rdzv-backend", "static", "--master-addr",
                                         "127.0.0.1", "--master-port", "29600"});
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().IsInvalidArgument());
  CHECK_THAT(plan.status().message(), Catch::Contains("--nnodes 2:3") && Catch::Contains("fixed membership"));

  plan = Resolve({"--nnodes", "2", "--rdzv-backend", "c10d"});
  REQUIRE_FALSE(plan.ok());
  CHECK_THAT(plan.status().message(), Catch::Contains("needs --rdzv-endpoint"));

  plan = Resolve({"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", "192.0.2.1:2379"});
  REQUIRE_FALSE(plan.ok());
  CHECK_THAT(plan.status().message(), Catch::Contains("--rdzv-backend etcd"));
}

TEST_CASE("etcd-v3 resolves to the etcd handler at its endpoint") {
  Result<RendezvousPlan> plan =
      Resolve({"--nnodes", "2", "--rdzv-backend", "etcd-v3", "--rdzv-endpoint", "192.0.2.1:2379"});
  REQUIRE(plan.ok());
  CHECK(plan->kind == HandlerKind::kEtcd);
  CHECK(plan->endpoint == "192.0.2.1:2379");
}

TEST_CASE("AgentStorePort: where the workers' store binds") {
  CHECK(AgentStorePort(Parse({"--master-port", "29700"})) == 29700);
  CHECK(AgentStorePort(Parse({})) == 0);
  CHECK_FALSE(AgentStorePort(Parse({"--no-agent-store"})).has_value());
  const std::vector<std::string> static_job = {"--nnodes", "2", "--rdzv-backend", "static", "--master-addr",
                                               "127.0.0.1", "--master-port", "29600"};
  std::vector<std::string> rank0 = static_job, rank1 = static_job;
  rank0.insert(rank0.end(), {"--node-rank", "0"});
  rank1.insert(rank1.end(), {"--node-rank", "1"});
  CHECK(AgentStorePort(Parse(rank0)) == 29600);
  CHECK_FALSE(AgentStorePort(Parse(rank1)).has_value());
  CHECK(AgentStorePort(Parse({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "192.0.2.1"})) == 0);
}

}  // namespace
}  // namespace ctrun::launcher
