#include "launcher/cli/slurm_env.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/cli/config.h"

namespace ctrun::launcher {
namespace {

// Names in `resolving` resolve; the others have the NodeAddr in `addrs`, or
// none (scontrol fails). Records every scontrol query.
class FakeResolver : public NodeAddressResolver {
 public:
  std::set<std::string> resolving;
  std::map<std::string, std::string> addrs;
  mutable std::vector<std::string> queried;

  bool Resolves(const std::string& name) const override { return resolving.count(name) != 0; }
  Result<std::string> NodeAddr(const std::string& name) const override {
    queried.push_back(name);
    auto it = addrs.find(name);
    if (it == addrs.end()) return Status::Unavailable("`scontrol show node " + name + "` failed: no such node");
    return it->second;
  }
};

// The environment srun gives the task on the second node of a 2-node job.
Environment StepEnv() {
  return {{"SLURM_JOB_ID", "4217"},        {"SLURM_STEP_ID", "0"},          {"SLURM_NNODES", "2"},
          {"SLURM_JOB_NUM_NODES", "2"},    {"SLURM_STEP_NUM_NODES", "2"},   {"SLURM_NODEID", "1"},
          {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_STEP_NODELIST", "n[1-2]"}, {"SLURM_NTASKS", "2"},
          {"SLURM_STEP_NUM_TASKS", "2"},   {"SLURMD_NODENAME", "n2"}};
}

using User = std::map<std::string_view, std::string>;

struct Fixture {
  FakeResolver resolver;
  Environment env = StepEnv();
  LaunchConfig so_far;  // what the rows before the asked flag produced

  Fixture() {
    resolver.addrs = {{"n1", "10.0.0.1"}, {"n2", "10.0.0.2"}};
    so_far.min_nodes = so_far.max_nodes = 2;
    so_far.rdzv_backend = RdzvBackend::kC10d;
  }

  // The default's "value <- source", "none", or "error: message".
  std::string For(std::string_view flag, const User& user = {}) {
    auto slurm = SlurmEnv::Detect(env, resolver);
    REQUIRE(slurm);
    auto d = slurm->DefaultFor(flag, so_far, user);
    if (!d.ok()) return "error: " + d.status().message();
    if (!*d) return "none";
    return (*d)->value + " <- " + (*d)->source;
  }
};

TEST_CASE("detection needs a job id, a step id and a node count") {
  FakeResolver r;
  Environment env = StepEnv();
  CHECK(SlurmEnv::Detect(env, r));
  for (const char* var : {"SLURM_JOB_ID", "SLURM_STEP_ID"}) {
    Environment e = StepEnv();
    e.erase(var);
    INFO(var);
    CHECK_FALSE(SlurmEnv::Detect(e, r));
  }
  Environment counts = StepEnv();
  counts.erase("SLURM_NNODES");
  counts.erase("SLURM_STEP_NUM_NODES");
  CHECK(SlurmEnv::Detect(counts, r));  // SLURM_JOB_NUM_NODES is enough
  counts.erase("SLURM_JOB_NUM_NODES");
  CHECK_FALSE(SlurmEnv::Detect(counts, r));
  env["CTRUN_IGNORE_SLURM"] = "1";
  CHECK_FALSE(SlurmEnv::Detect(env, r));
  CHECK_FALSE(SlurmEnv::Detect(Environment{}, r));
}

TEST_CASE_METHOD(Fixture, "a multi-node step gives c10d at the first host's address") {
  CHECK(For("--nnodes") == "2 <- SLURM_STEP_NUM_NODES");
  CHECK(For("--rdzv-backend") == "c10d <- SLURM_JOB_ID");
  CHECK(For("--rdzv-endpoint") == "10.0.0.1:29417 <- SLURM_STEP_NODELIST");  // 29400 + (4217 + 0) % 100
  CHECK(For("--rdzv-id") == "4217.0 <- SLURM_JOB_ID");
  CHECK(For("--node-rank") == "1 <- SLURM_NODEID");
  CHECK(For("--local-addr") == "10.0.0.2 <- SLURMD_NODENAME");
  CHECK(For("--signals-to-handle") == "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 <- SLURM_STEP_ID");
  CHECK(For("--max-restarts") == "none");
  CHECK(For("--master-addr") == "none");  // c10d: the endpoint carries it
}

TEST_CASE_METHOD(Fixture, "the port moves with the job and step so jobs sharing a first node do not collide") {
  env["SLURM_STEP_ID"] = "3";
  CHECK(For("--rdzv-endpoint") == "10.0.0.1:29420 <- SLURM_STEP_NODELIST");
  env["SLURM_JOB_ID"] = "99";
  env["SLURM_STEP_ID"] = "1";
  CHECK(For("--rdzv-endpoint") == "10.0.0.1:29400 <- SLURM_STEP_NODELIST");
}

TEST_CASE_METHOD(Fixture, "names that resolve are kept; scontrol is asked only for those that do not") {
  resolver.resolving = {"n1", "n2"};
  CHECK(For("--rdzv-endpoint") == "n1:29417 <- SLURM_STEP_NODELIST");
  CHECK(For("--local-addr") == "none");
  CHECK(resolver.queried.empty());
  resolver.resolving = {"n2"};
  CHECK(For("--rdzv-endpoint") == "10.0.0.1:29417 <- SLURM_STEP_NODELIST");
  CHECK(resolver.queried == std::vector<std::string>{"n1"});
}

TEST_CASE_METHOD(Fixture, "an IPv6 NodeAddr is bracketed in the endpoint") {
  resolver.addrs["n1"] = "fd00::1";
  CHECK(For("--rdzv-endpoint") == "[fd00::1]:29417 <- SLURM_STEP_NODELIST");
}

TEST_CASE_METHOD(Fixture, "the node list falls back from the step's to the job's to SLURM_NODELIST") {
  env.erase("SLURM_STEP_NODELIST");
  env["SLURM_JOB_NODELIST"] = "gpu[07-08]";
  resolver.addrs["gpu07"] = "10.1.0.7";
  CHECK(For("--rdzv-endpoint") == "10.1.0.7:29417 <- SLURM_JOB_NODELIST");
  env.erase("SLURM_JOB_NODELIST");
  env["SLURM_NODELIST"] = "cpu3,cpu9";
  resolver.resolving = {"cpu3"};
  CHECK(For("--rdzv-endpoint") == "cpu3:29417 <- SLURM_NODELIST");
}

TEST_CASE_METHOD(Fixture, "the node count falls back from the step's to SLURM_NNODES to the job's") {
  env.erase("SLURM_STEP_NUM_NODES");
  CHECK(For("--nnodes") == "2 <- SLURM_NNODES");
  env.erase("SLURM_NNODES");
  CHECK(For("--nnodes") == "2 <- SLURM_JOB_NUM_NODES");
}

TEST_CASE_METHOD(Fixture, "workers per node: Slurm's GPUs, else visible CUDA devices, else CPUs per task") {
  CHECK(For("--nproc-per-node") == "none");
  env["SLURM_CPUS_PER_TASK"] = "6";
  CHECK(For("--nproc-per-node") == "6 <- SLURM_CPUS_PER_TASK");
  env["CUDA_VISIBLE_DEVICES"] = "GPU-aa,GPU-bb,GPU-cc";
  CHECK(For("--nproc-per-node") == "3 <- CUDA_VISIBLE_DEVICES");
  env["SLURM_GPUS_ON_NODE"] = "4";
  CHECK(For("--nproc-per-node") == "4 <- SLURM_GPUS_ON_NODE");
  env["SLURM_GPUS_ON_NODE"] = "0";
  env["CUDA_VISIBLE_DEVICES"] = "NoDevFiles";
  CHECK(For("--nproc-per-node") == "6 <- SLURM_CPUS_PER_TASK");
  env["CUDA_VISIBLE_DEVICES"] = "";
  CHECK(For("--nproc-per-node") == "6 <- SLURM_CPUS_PER_TASK");
}

TEST_CASE_METHOD(Fixture, "a single-node step sets no rendezvous address and asks no resolver") {
  env["SLURM_STEP_NUM_NODES"] = "1";
  env["SLURM_STEP_NUM_TASKS"] = "1";
  env["SLURM_NODEID"] = "0";
  so_far.min_nodes = so_far.max_nodes = 1;
  CHECK(For("--nnodes") == "1 <- SLURM_STEP_NUM_NODES");
  for (std::string_view flag : {"--rdzv-backend", "--rdzv-endpoint", "--node-rank", "--local-addr"}) {
    INFO(flag);
    CHECK(For(flag) == "none");
  }
  CHECK(For("--rdzv-id") == "4217.0 <- SLURM_JOB_ID");
  CHECK(resolver.queried.empty());
}

TEST_CASE_METHOD(Fixture, "flag --standalone keeps only the worker count and the signals") {
  User user{{"--standalone", "1"}};
  env["SLURM_GPUS_ON_NODE"] = "2";
  CHECK(For("--nproc-per-node", user) == "2 <- SLURM_GPUS_ON_NODE");
  CHECK(For("--signals-to-handle", user) != "none");
  for (std::string_view flag : {"--nnodes", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--node-rank"}) {
    INFO(flag);
    CHECK(For(flag, user) == "none");
  }
}

TEST_CASE_METHOD(Fixture, "a user's master address keeps the static backend, with the Slurm node rank") {
  User user{{"--master-addr", "10.9.9.9"}};
  CHECK(For("--rdzv-backend", user) == "none");
  so_far.rdzv_backend = RdzvBackend::kStatic;
  CHECK(For("--rdzv-endpoint", user) == "none");
  CHECK(For("--node-rank", user) == "1 <- SLURM_NODEID");
  CHECK(For("--master-addr") == "10.0.0.1 <- SLURM_STEP_NODELIST");  // static chosen by the user alone
}

TEST_CASE_METHOD(Fixture, "a smaller --nnodes from the user drops node ids beyond it") {
  so_far.min_nodes = so_far.max_nodes = 1;
  CHECK(For("--node-rank") == "none");
  so_far.max_nodes = 4;
  CHECK(For("--node-rank") == "1 <- SLURM_NODEID");
}

TEST_CASE_METHOD(Fixture, "bad Slurm values name the variable, the value and the fix") {
  auto error_for = [&](const char* var, const char* value, std::string_view flag) {
    Environment saved = env;
    env[var] = value;
    std::string out = For(flag);
    env = saved;
    return out;
  };
  using Catch::Contains;
  CHECK_THAT(error_for("SLURM_STEP_NODELIST", "n[1-", "--rdzv-endpoint"),
             Contains("error: SLURM_STEP_NODELIST 'n[1-': ") && Contains("e.g. n[1-3,5]"));
  CHECK_THAT(error_for("SLURM_STEP_NODELIST", "n[1-3]", "--rdzv-endpoint"),
             Contains("SLURM_STEP_NODELIST 'n[1-3]': lists 3 hosts but SLURM_STEP_NUM_NODES is 2"));
  CHECK_THAT(error_for("SLURM_NODEID", "2", "--node-rank"),
             Contains("error: SLURM_NODEID '2': must be below the step's node count 2 (use 0..1"));
  CHECK_THAT(error_for("SLURM_NODEID", "x", "--node-rank"), Contains("error: SLURM_NODEID 'x': not a node id"));
  CHECK_THAT(error_for("SLURM_STEP_NUM_NODES", "0", "--nnodes"),
             Contains("error: SLURM_STEP_NUM_NODES '0': not a node count"));
  CHECK_THAT(error_for("SLURM_STEP_NUM_TASKS", "4", "--nnodes"),
             Contains("error: SLURM_STEP_NUM_TASKS '4': srun started 4 ctrun tasks on 2 nodes") &&
                 Contains("srun --ntasks-per-node=1"));
  CHECK_THAT(error_for("SLURM_JOB_ID", "12_3", "--rdzv-id"), Contains("error: SLURM_JOB_ID '12_3': not a Slurm id"));
  CHECK_THAT(error_for("SLURM_GPUS_ON_NODE", "two", "--nproc-per-node"),
             Contains("error: SLURM_GPUS_ON_NODE 'two': not a count"));
  CHECK_THAT(error_for("SLURM_CPUS_PER_TASK", "-1", "--nproc-per-node"),
             Contains("error: SLURM_CPUS_PER_TASK '-1': not a count"));
  resolver.addrs.erase("n1");
  CHECK_THAT(For("--rdzv-endpoint"),
             Contains("error: SLURM_STEP_NODELIST 'n[1-2]': first host 'n1' does not resolve and has no NodeAddr") &&
                 Contains("give --rdzv-endpoint HOST:PORT"));
  resolver.addrs.erase("n2");
  CHECK_THAT(For("--local-addr"), Contains("error: SLURMD_NODENAME 'n2': does not resolve") &&
                                      Contains("give --local-addr"));
}

TEST_CASE("NodeAddr is read from scontrol's output") {
  const char* out =
      "NodeName=n1 Arch=x86_64 CoresPerSocket=1\n"
      "   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.40\n"
      "   NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8\n";
  auto addr = NodeAddrFromScontrol(out);
  REQUIRE(addr.ok());
  CHECK(*addr == "127.0.0.1");
  auto one_line = NodeAddrFromScontrol("NodeName=n2 NodeAddr=fd00::2 NodeHostName=vm");
  REQUIRE(one_line.ok());
  CHECK(*one_line == "fd00::2");
  CHECK(NodeAddrFromScontrol("Node n9 not found\n").status().IsNotFound());
  CHECK(NodeAddrFromScontrol("XNodeAddr=1.2.3.4 NodeAddr= ").status().IsNotFound());
}

// Through ParseCommandLine, with node lists of IP literals so that the real
// resolver answers without DNS or scontrol.
Environment IpStepEnv() {
  Environment env = StepEnv();
  env["SLURM_STEP_NODELIST"] = "127.0.0.[1-2]";
  env["SLURM_JOB_NODELIST"] = "127.0.0.[1-2]";
  env["SLURMD_NODENAME"] = "127.0.0.2";
  return env;
}

LaunchConfig Parse(std::vector<std::string> args, const Environment& env) {
  args.push_back("train.py");
  auto r = ParseCommandLine(args, env);
  INFO((r.ok() ? "" : r.status().message()));
  REQUIRE(r.ok());
  return r->config;
}

TEST_CASE("inside a step, no flags: Slurm fills the rendezvous, node 0 hosts it") {
  LaunchConfig c = Parse({}, IpStepEnv());
  CHECK(c.min_nodes == 2);
  CHECK(c.max_nodes == 2);
  CHECK(c.rdzv_backend == RdzvBackend::kC10d);
  CHECK(c.rdzv_endpoint == "127.0.0.1:29417");
  CHECK(c.rdzv_host == "127.0.0.1");
  CHECK(c.rdzv_port == 29417);
  CHECK(c.rdzv_id == "4217.0");
  CHECK(c.node_rank == 1);
  CHECK(c.node_rank_given);
  CHECK(c.rdzv_conf.is_host == std::optional<bool>(false));
  CHECK_FALSE(c.local_addr);  // 127.0.0.2 resolves: the host name is advertised, as torchrun does
  CHECK(c.nproc_per_node == 1);
  CHECK(c.signals_to_handle == std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1});

  Environment first = IpStepEnv();
  first["SLURM_NODEID"] = "0";
  CHECK(Parse({}, first).rdzv_conf.is_host == std::optional<bool>(true));
}

TEST_CASE("flags beat PET_* beat Slurm") {
  Environment env = IpStepEnv();
  env["PET_NNODES"] = "1:3";
  env["PET_RDZV_ID"] = "pet-id";
  env["PET_RDZV_ENDPOINT"] = "10.5.5.5:1234";
  LaunchConfig c = Parse({"--rdzv-id", "flag-id"}, env);
  CHECK(c.min_nodes == 1);
  CHECK(c.max_nodes == 3);
  CHECK(c.rdzv_id == "flag-id");
  CHECK(c.rdzv_endpoint == "10.5.5.5:1234");
  CHECK(c.rdzv_backend == RdzvBackend::kC10d);  // not given: still Slurm's
  CHECK(c.node_rank == 1);
  CHECK_FALSE(c.rdzv_conf.is_host);  // the user's endpoint: the agents decide as usual

  LaunchConfig flags = Parse({"--nnodes", "2", "--nproc-per-node", "3", "--rdzv-backend", "static",
                              "--master-addr", "10.1.1.1", "--node-rank", "0", "--signals-to-handle", "TERM"},
                             env);
  CHECK(flags.rdzv_backend == RdzvBackend::kStatic);
  CHECK(flags.nproc_per_node == 3);
  CHECK(flags.master_addr == "10.1.1.1");
  CHECK(flags.node_rank == 0);
  CHECK(flags.signals_to_handle == std::vector<int>{SIGTERM});
}

TEST_CASE("outside srun the Slurm variables are ignored") {
  Environment env = IpStepEnv();
  env.erase("SLURM_STEP_ID");
  env["SLURM_NODEID"] = "garbage";
  LaunchConfig c = Parse({}, env);
  CHECK(c.max_nodes == 1);
  CHECK(c.rdzv_id == "none");
  CHECK(c.rdzv_backend == RdzvBackend::kStatic);
}

TEST_CASE("a bad Slurm value is a usage error naming the variable") {
  Environment env = IpStepEnv();
  env["SLURM_STEP_NODELIST"] = "127.0.0.[2-1]";
  auto r = ParseCommandLine({"train.py"}, env);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().IsInvalidArgument());
  CHECK_THAT(r.status().message(), Catch::StartsWith("SLURM_STEP_NODELIST '127.0.0.[2-1]': range '2-1' runs backwards"));
  // Given an endpoint, the node list is not needed and not checked.
  CHECK(ParseCommandLine({"--rdzv-endpoint", "h:1", "train.py"}, env).ok());
}

}  // namespace
}  // namespace ctrun::launcher
