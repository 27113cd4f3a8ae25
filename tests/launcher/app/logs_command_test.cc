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

TEST_CASE("ctrun logs prints each line of a chunk as node/rank: text") {
  std::string out = "x\n";
  AppendLogChunk(out, "a-long-node-label-past-sso#4242", 17, "one\n\nthree\n");
  CHECK(out ==
        "x\na-long-node-label-past-sso#4242/17: one\na-long-node-label-past-sso#4242/17: \n"
        "a-long-node-label-past-sso#4242/17: three\n");
  out.clear();
  AppendLogChunk(out, "n", 0, "no newline");  // a last line without one gets one
  CHECK(out == "n/0: no newline\n");
  AppendLogChunk(out, "n", 1, "");  // nothing
  CHECK(out == "n/0: no newline\n");
  // Many lines: the buffer grows while the prefix is copied from it.
  std::string text;
  std::string want;
  for (int i = 0; i < 1000; ++i) {
    text += std::to_string(i) + "\n";
    want += FormatLogLine("node", 3, std::to_string(i));
  }
  out.clear();
  out.shrink_to_fit();
  AppendLogChunk(out, "node", 3, text);
  CHECK(out == want);
}

}  // namespace
}  // namespace ctrun::launcher
