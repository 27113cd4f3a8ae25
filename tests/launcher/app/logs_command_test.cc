// `ctrun logs`: its flags (status's rendezvous rows, and its own --follow,
// --rank, --node, --since) and the line it prints.
#include "launcher/app/logs_command.h"

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

TEST_CASE("ctrun logs reads the rendezvous flags as status does, and its own; unique prefixes too") {
  // In full, and cut to unique prefixes as argparse takes them.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--rdzv-endpoint", "10.0.0.1:1234", "--rdzv_id=job7", "-f", "--rank", "3", "--node=n2", "--since", "2"},
           {"--rdzv-e", "10.0.0.1:1234", "--rdzv-i", "job7", "--fol", "--ra=3", "--no", "n2", "--si", "2"}}) {
    auto a = ParseLogsArgs(args, {});
    REQUIRE(a.ok());
    CHECK(a->target.endpoint == "10.0.0.1:1234");
    CHECK(a->target.run_id == "job7");
    CHECK(a->follow);
    CHECK(a->rank == 3);
    CHECK(a->node == "n2");
    CHECK(a->since_s == 2);
  }

  auto a = ParseLogsArgs({}, {{"PET_RDZV_ENDPOINT", "head"}, {"PET_RDZV_ID", "k8s"}});
  REQUIRE(a.ok());
  CHECK(a->target.endpoint == "head:29400");
  CHECK(a->target.run_id == "k8s");
  CHECK_FALSE(a->follow);
  CHECK_FALSE(a->rank);
  CHECK_FALSE(a->since_s);

  a = ParseLogsArgs({"--help"}, {});
  REQUIRE(a.ok());
  CHECK(a->help);
}

TEST_CASE("ctrun logs refuses an ambiguous prefix, and names an abbreviated flag in full") {
  auto a = ParseLogsArgs({"--r", "3"}, {});
  REQUIRE_FALSE(a.ok());
  // --r could be --rank or a rendezvous flag.
  CHECK(a.status().message() ==
        "ctrun logs: ambiguous flag '--r' could match --rdzv-endpoint, --rdzv-id, --rdzv-conf, --rank (write more of "
        "it)");
  a = ParseLogsArgs({"--ran"}, {});
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().message() == "--rank needs a value (see ctrun logs --help)");
  a = ParseLogsArgs({"--follow=yes"}, {});
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().message() == "ctrun logs: --follow takes no value (write it alone)");
}

TEST_CASE("ctrun logs refuses other flags and bad values in one line naming them") {
  for (const auto& [args, names] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--nproc-per-node", "2"}, "--nproc-per-node"},
           {{"--rank", "-1"}, "--rank"},
           {{"--rank", "x"}, "--rank"},
           {{"--since", "-3"}, "--since"},
           {{"--since", "soon"}, "--since"},
           {{"--node", ""}, "--node"},
           {{"--rank"}, "--rank"},
           {{"--rdzv-endpoint", "h:notaport"}, "--rdzv-endpoint"},
       }) {
    auto a = ParseLogsArgs(args, {});
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().IsInvalidArgument());
    CHECK(a.status().message().find(names) != std::string::npos);
    CHECK(a.status().message().find('\n') == std::string::npos);
  }
}

TEST_CASE("ctrun logs prints node/rank: text") {
  CHECK(FormatLogLine("node3", 12, "loss 0.5") == "node3/12: loss 0.5\n");
  CHECK(FormatLogLine("h", 0, "") == "h/0: \n");
  std::string out = "x\n";
  AppendLogLine(out, "10.0.0.1#7", 2147483647, "a");
  AppendLogLine(out, "n", 0, "b");
  CHECK(out == "x\n10.0.0.1#7/2147483647: a\nn/0: b\n");
}

}  // namespace
}  // namespace ctrun::launcher
