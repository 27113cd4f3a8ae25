// --ft-replicas and --ft-group-size as ParseCommandLine resolves them: the
// node count a replica group's rendezvous takes, the group a node is in, and
// the one-line refusals.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/config.h"

namespace ctrun::launcher {
namespace {

using Args = std::vector<std::string>;

Args Ft(Args more) {
  Args args = {"--ft-replicas", "1:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:29400", "--rdzv-id", "job"};
  args.insert(args.end(), more.begin(), more.end());
  args.push_back("t.py");
  return args;
}

LaunchConfig FtGood(const Args& args, const Environment& env = {}) {
  auto r = ParseCommandLine(args, env);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  REQUIRE(r->config.ft.has_value());
  return r->config;
}

std::string FtBad(const Args& args, const Environment& env = {}) {
  auto r = ParseCommandLine(args, env);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message().find('\n') == std::string::npos);
  return r.status().message();
}

TEST_CASE("a one-node replica group rendezvous locally, whatever its node rank", "[config][ft]") {
  LaunchConfig c = FtGood(Ft({"--node-rank", "3"}));
  CHECK(c.ft->group_size == 1);
  CHECK(c.min_nodes == 1);
  CHECK(c.max_nodes == 1);
  CHECK(c.node_rank == 0);
  CHECK(c.local_rendezvous());
}

TEST_CASE("--ft-group-size: node rank R is in group R / size, whose nodes rendezvous at the endpoint", "[config][ft]") {
  LaunchConfig c = FtGood(Ft({"--ft-group-size", "2", "--node-rank", "5"}));
  CHECK(c.ft->group_size == 2);
  CHECK(c.ft->group_index == 2);
  CHECK(c.ft->group_id() == "group-2");
  CHECK(c.ft->group_run_id(c.rdzv_id) == "job.group-2");
  CHECK(c.min_nodes == 2);
  CHECK(c.max_nodes == 2);
  CHECK(c.node_rank == 0);  // the group's rendezvous ranks its nodes
  CHECK_FALSE(c.node_rank_given);
  CHECK_FALSE(c.local_rendezvous());
  CHECK(c.rdzv_conf.is_host == std::optional<bool>(false));  // ctrund serves the groups' rendezvous
  // --nnodes may say the group's size; the variables Kubeflow sets work too.
  c = FtGood(Ft({"--ft-group-size", "2", "--nnodes", "2", "--node-rank", "1"}));
  CHECK(c.ft->group_index == 0);
  c = FtGood(Ft({}), {{"PET_FT_GROUP_SIZE", "3"}, {"PET_NODE_RANK", "4"}});
  CHECK(c.ft->group_size == 3);
  CHECK(c.ft->group_index == 1);
  CHECK(c.max_nodes == 3);
}

TEST_CASE("--ft-group-size: bad values and combinations are refused with one line", "[config][ft]") {
  for (const char* v : {"0", "65", "x", "-1", "1.5"}) {
    INFO(v);
    CHECK_THAT(FtBad(Ft({"--ft-group-size", v, "--node-rank", "0"})),
               Catch::Contains("must be a node count from 1 to 64"));
  }
  CHECK_THAT(FtBad({"--ft-group-size", "2", "t.py"}), Catch::Contains("replica groups are for --ft-replicas"));
  CHECK_THAT(FtBad(Ft({"--ft-group-size", "2"})), Catch::Contains("--ft-group-size 2 needs this node's --node-rank"));
  CHECK_THAT(FtBad(Ft({"--ft-group-size", "2", "--nnodes", "4", "--node-rank", "1"})),
             Catch::Contains("give --nnodes 2 or drop it"));
  CHECK_THAT(FtBad(Ft({"--nnodes", "2"})), Catch::Contains("give --nnodes 1 or drop it"));
  CHECK_THAT(FtBad(Ft({"--ft-group-size", "2", "--node-rank", "0", "--rdzv-conf", "is_host=1"})),
             Catch::Contains("served by ctrund at --rdzv-endpoint, not by an agent; drop is_host=1"));
}

}  // namespace
TEST_CASE("--ft-exact: with --ft-replicas the workers' switch, alone a one-line refusal", "[config][ft]") {
  CHECK(FtGood(Ft({"--ft-exact"})).ft_exact);
  CHECK_FALSE(FtGood(Ft({})).ft_exact);
  CHECK(FtGood(Ft({}), {{"PET_FT_EXACT", "1"}}).ft_exact);
  CHECK(FtBad({"--ft-exact", "t.py"}) ==
        "--ft-exact: exact results are for fault-tolerant training (give --ft-replicas MIN:MAX too, or drop it)");
  CHECK(FtBad({"t.py"}, {{"PET_FT_EXACT", "1"}}) ==
        "PET_FT_EXACT: exact results are for fault-tolerant training (give --ft-replicas MIN:MAX too, or drop it)");
}

}  // namespace ctrun::launcher
