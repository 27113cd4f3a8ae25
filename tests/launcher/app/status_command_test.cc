// `ctrun status`: its flags (the launcher's table rows, both spellings, the
// PET_* fallbacks) and the table it prints.
#include "launcher/app/status_command.h"

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

TEST_CASE("ctrun status reads the launcher's rendezvous flags, spellings and PET_* variables") {
  auto a = ParseStatusArgs({"--rdzv-endpoint", "10.0.0.1:1234", "--rdzv_id=job7"}, {});
  REQUIRE(a.ok());
  CHECK(a->endpoint == "10.0.0.1:1234");
  CHECK(a->run_id == "job7");

  a = ParseStatusArgs({}, {{"PET_RDZV_ENDPOINT", "head"}, {"PET_RDZV_ID", "k8s"}});
  REQUIRE(a.ok());
  CHECK(a->endpoint == "head:29400");
  CHECK(a->run_id == "k8s");

  a = ParseStatusArgs({"--rdzv-id", "flag"}, {{"PET_RDZV_ID", "env"}});
  REQUIRE(a.ok());
  CHECK(a->run_id == "flag");  // the flag wins

  a = ParseStatusArgs({}, {});
  REQUIRE(a.ok());
  CHECK(a->endpoint == "localhost:29400");
  // No run named: the server picks its only run (a launch without
  // --rdzv-id runs 'none', torchrun's default, and is found that way).
  CHECK(a->run_id.empty());

  a = ParseStatusArgs({"--rdzv-endpoint=[::1]:5", "--rdzv-conf", "token_file=/t"}, {});
  REQUIRE(a.ok());
  CHECK(a->endpoint == "[::1]:5");
  CHECK(a->config.rdzv_conf.token_file == "/t");

  a = ParseStatusArgs({"-h"}, {});
  REQUIRE(a.ok());
  CHECK(a->help);
}

TEST_CASE("ctrun status refuses other flags and bad values in one line") {
  auto a = ParseStatusArgs({"--nproc-per-node", "2"}, {});
  REQUIRE(!a.ok());
  CHECK(a.status().message() ==
        "ctrun status: unknown argument '--nproc-per-node' (it takes only --rdzv-endpoint, --rdzv-id, --rdzv-conf, --why and --json)");
  a = ParseStatusArgs({"--rdzv-id"}, {});
  REQUIRE(!a.ok());
  CHECK(a.status().message().rfind("--rdzv-id needs a value", 0) == 0);
  a = ParseStatusArgs({"--rdzv-endpoint", "h:99999"}, {});
  REQUIRE(!a.ok());
  CHECK(a.status().message().rfind("--rdzv-endpoint 'h:99999': ", 0) == 0);
  a = ParseStatusArgs({}, {{"PET_RDZV_CONF", "bogus=1"}});
  REQUIRE(!a.ok());
  CHECK(a.status().message().rfind("PET_RDZV_CONF 'bogus=1': unknown key 'bogus'", 0) == 0);
}

TEST_CASE("ctrun status takes unique prefixes of its flags, as argparse does") {
  auto a = ParseStatusArgs({"--rdzv-end", "10.0.0.1:1234", "--rdzv_i=job7", "--wh"}, {});
  REQUIRE(a.ok());
  CHECK(a->endpoint == "10.0.0.1:1234");
  CHECK(a->run_id == "job7");
  CHECK(a->why);
  a = ParseStatusArgs({"--he"}, {});
  REQUIRE(a.ok());
  CHECK(a->help);
  // A prefix of several flags is refused, naming them.
  a = ParseStatusArgs({"--rdzv", "x"}, {});
  REQUIRE(!a.ok());
  CHECK(a.status().message() ==
        "ctrun status: ambiguous flag '--rdzv' could match --rdzv-endpoint, --rdzv-id, --rdzv-conf (write more of "
        "it)");
  // An abbreviation's errors name the flag in full.
  a = ParseStatusArgs({"--rdzv-i"}, {});
  REQUIRE(!a.ok());
  CHECK(a.status().message().rfind("--rdzv-id needs a value", 0) == 0);
  a = ParseStatusArgs({"--why=1"}, {});
  REQUIRE(!a.ok());
  CHECK(a.status().message() == "ctrun status: --why takes no value (write it alone)");
  // A short flag is matched exactly.
  a = ParseStatusArgs({"-w"}, {});
  REQUIRE(!a.ok());
  CHECK(a.status().message().rfind("ctrun status: unknown argument '-w'", 0) == 0);
}

TEST_CASE("The status table: one header line, then a line per node") {
  rdzv::RunView v;
  v.counts.round = 3;
  v.counts.complete = true;
  v.counts.min_nodes = 2;
  v.counts.max_nodes = 4;
  v.counts.live_nodes = 3;
  v.world_size = 4;
  v.nodes = {{rdzv::NodeId{"node-a", 11, 0}, "member", 0, 2, "10.0.0.1", 0.25, {}, {}},
             {rdzv::NodeId{"node-b", 22, 0}, "member", 1, 2, "10.0.0.2", 1.5, {}, {}},
             {rdzv::NodeId{"node-c", 33, 0}, "spare", std::nullopt, 2, "10.0.0.3", 12.4, {}, {}}};
  CHECK(FormatStatus("job", "head:29400", v) ==
        "run 'job' on head:29400: round 3, running, world size 4; nodes 2..4, 3 live\n"
        "RANK  STATE       NODE      WORKERS  ADDR      LAST KEEP-ALIVE\n"
        "0     member      node-a#11       2  10.0.0.1  0.2 s ago\n"
        "1     member      node-b#22       2  10.0.0.2  1.5 s ago\n"
        "-     spare       node-c#33       2  10.0.0.3  12 s ago\n");
  v.counts.complete = false;
  v.counts.participants = 1;
  v.counts.rejoining = 1;
  v.nodes.clear();
  CHECK(FormatStatus("job", "head:29400", v) ==
        "run 'job' on head:29400: round 3, forming, 1/4 nodes (min 2), 1 expected back; nodes 2..4, 3 live\n"
        "no nodes\n");
}

TEST_CASE("The status table ends with the unhealthy nodes, the budget and each report") {
  rdzv::RunView v;
  v.counts.closed = true;
  v.counts.min_nodes = 2;
  v.counts.max_nodes = 3;
  v.counts.unhealthy = 2;
  v.counts.max_unhealthy = 1;
  v.unhealthy = {{rdzv::NodeId{"node-b", 22, 0}, "health check 'c.sh' exited with 1\n  disk full"},
                 {rdzv::NodeId{"node-c", 33, 0}, "a worker asked to exclude this node"}};
  CHECK(FormatStatus("job", "head:29400", v) ==
        "run 'job' on head:29400: round 0, closed; nodes 2..3, 0 live\n"
        "no nodes\n"
        "unhealthy nodes: 2 (the job ends above 1, --max-unhealthy-nodes)\n"
        "  node-b#22:\n"
        "    health check 'c.sh' exited with 1\n"
        "      disk full\n"
        "  node-c#33:\n"
        "    a worker asked to exclude this node\n");
}

TEST_CASE("The status table shows each node's median step and the stragglers") {
  rdzv::RunView v;
  v.counts.round = 1;
  v.counts.complete = true;
  v.counts.min_nodes = 3;
  v.counts.max_nodes = 3;
  v.counts.live_nodes = 3;
  v.world_size = 3;
  v.nodes = {{rdzv::NodeId{"a", 1, 0}, "member", 0, 1, "10.0.0.1", 0.25, 0.1, {}},
             {rdzv::NodeId{"b", 2, 0}, "member", 1, 1, "10.0.0.2", 0.25, 0.2, {1}},
             {rdzv::NodeId{"c", 3, 0}, "member", 2, 1, "10.0.0.3", 0.25, std::nullopt, {}}};
  CHECK(FormatStatus("job", "head:29400", v) ==
        "run 'job' on head:29400: round 1, running, world size 3; nodes 3..3, 3 live\n"
        "RANK  STATE       NODE WORKERS  ADDR      STEP      LAST KEEP-ALIVE\n"
        "0     member      a#1        1  10.0.0.1  0.100 s   0.2 s ago\n"
        "1     member      b#2        1  10.0.0.2  0.200 s   0.2 s ago\n"
        "2     member      c#3        1  10.0.0.3  -         0.2 s ago\n"
        "stragglers: rank 1 on b#2\n");
}

TEST_CASE("A fault-tolerant run: the quorum, each group's step, the groups lost or waiting") {
  rdzv::RunView v;
  v.has_rendezvous = false;
  v.ft = rdzv::FtRunView{
      .min_replicas = 2,
      .max_replicas = 3,
      .quorum = rdzv::Quorum{.id = 4,
                             .members = {{.id = "10.0.0.1#11", .step = 12, .address = "", .commit_failures = 0},
                                         {.id = "10.0.0.2#22", .step = 12, .address = "", .commit_failures = 0},
                                         {.id = "10.0.0.3#33", .step = 3, .address = "", .commit_failures = 0}}},
      .groups = {"10.0.0.1#11", "10.0.0.3#33", "10.0.0.4#44"},
      .waiting = {"10.0.0.4#44"},
      .reason = "new quorum (3 asking, 3 healthy, 1 held back for being late, min 2)"};
  CHECK(FormatStatus("job", "head:29400", v) ==
        "run 'job' on head:29400: a fault-tolerant quorum (each replica group runs its own rendezvous)\n"
        "fault tolerance: replicas 2..3, quorum 4 of 3 replica groups, training step 12\n"
        "last decision: new quorum (3 asking, 3 healthy, 1 held back for being late, min 2)\n"
        "GROUP           STEP  STATE\n"
        "10.0.0.1#11       12  replica 0\n"
        "10.0.0.2#22       12  replica 1, lost\n"
        "10.0.0.3#33        3  replica 2\n"
        "10.0.0.4#44        -  not in the quorum, waiting for the next quorum\n");
  v.ft->quorum.reset();
  v.ft->groups = {"10.0.0.1#11"};
  v.ft->waiting = {"10.0.0.1#11"};
  v.ft->reason = "1 of 2 asking (min 2)";
  CHECK(FormatStatus("job", "head:29400", v) ==
        "run 'job' on head:29400: a fault-tolerant quorum (each replica group runs its own rendezvous)\n"
        "fault tolerance: replicas 2..3, no quorum yet (1 of 2 asking (min 2))\n"
        "GROUP           STEP  STATE\n"
        "10.0.0.1#11        -  not in the quorum, waiting for the next quorum\n");
}

}  // namespace
}  // namespace ctrun::launcher
