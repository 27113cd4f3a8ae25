// The flag table (launcher/cli/flags.h) and the flag values
// (launcher/cli/flag_values.h): torchrun's spellings and PET_ names, the
// help text's groups, endpoints, the closest spelling to a typo.
#include "launcher/cli/flags.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/cli/config.h"
#include "launcher/cli/flag_values.h"

namespace ctrun::launcher {
namespace {

TEST_CASE("the table has torchrun's spellings and PET_ names", "[flags]") {
  for (const FlagSpec& flag : Flags()) {
    INFO(flag.name);
    for (std::string_view s : flag.spellings) CHECK(FindFlag(s) == &flag);
    if (flag.name.rfind("--", 0) == 0 && flag.name.find('-', 2) != std::string_view::npos) {
      std::string underscored(flag.name);
      std::replace(underscored.begin() + 2, underscored.end(), '-', '_');
      CHECK(FindFlag(underscored) == &flag);  // every dashed flag has its underscored alias
    }
    if (!flag.env.empty()) {
      std::string dest(flag.name.substr(2));
      for (char& ch : dest) ch = ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      CHECK(flag.env == "PET_" + dest);
    }
  }
  CHECK(FindFlag("-m") == FindFlag("--module"));
  CHECK(FindFlag("-r") == FindFlag("--redirects"));
  CHECK(FindFlag("-t") == FindFlag("--tee"));
  CHECK(FindFlag("--nproc") == nullptr);  // exact only: ResolveFlag takes prefixes
}

TEST_CASE("help text is grouped like torchrun's and shows spellings and PET_ names", "[flags]") {
  auto r = ParseCommandLine({"--nnodes", "0", "--help"}, {});
  REQUIRE(r.ok());
  REQUIRE(r->action == ParseAction::kHelp);
  const std::string& help = r->text;
  // A usage line, then the examples, before the flag table.
  CHECK_THAT(help, Catch::StartsWith("usage: ctrun [OPTIONS] SCRIPT [SCRIPT_ARGS...]\n"));
  const size_t examples = help.find("\nExamples:\n  ctrun --nproc-per-node 4 train.py");
  REQUIRE(examples != std::string::npos);
  CHECK(examples < help.find("\nWorker/node size:\n"));
  for (const char* example : {"  ctrund --listen", "  srun --ntasks-per-node=1 ctrun", "  ctrun status ", "  ctrun logs ",
                              "  ctrun --ft-replicas"}) {
    CHECK(help.find(example) < help.find("\nWorker/node size:\n"));
  }
  size_t last = 0;
  for (const char* group : {"\nWorker/node size:\n", "\nRendezvous:\n", "\nUser-code launch:\n", "\nLogs:\n", "\nctrun:\n"}) {
    size_t at = help.find(group);
    INFO(group);
    REQUIRE(at != std::string::npos);
    CHECK(at > last);
    last = at;
  }
  for (const FlagSpec& flag : Flags()) {
    std::string spellings;
    for (std::string_view s : flag.spellings) spellings += fmt::format("{}{}", spellings.empty() ? "" : ", ", s);
    CHECK_THAT(help, Catch::Contains(spellings));
    if (!flag.env.empty()) CHECK_THAT(help, Catch::Contains(fmt::format("[env {}", flag.env)));
  }
  CHECK_THAT(help, Catch::Contains("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"));
  auto v = ParseCommandLine({"--version"}, {});
  REQUIRE(v.ok());
  CHECK(v->action == ParseAction::kVersion);
  CHECK_THAT(v->text, Catch::StartsWith("ctrun "));
}

TEST_CASE("ParseEndpoint", "[flags]") {
  auto e = ParseEndpoint(" [2001:db8::1]:8080 ", 1);
  REQUIRE(e.ok());
  CHECK(e->host == "2001:db8::1");
  CHECK(e->port == 8080);
  CHECK(e->port_given);
  auto d = ParseEndpoint("node-1.example_x", 29400);
  REQUIRE(d.ok());
  CHECK(d->port == 29400);
  CHECK_FALSE(d->port_given);
  CHECK_FALSE(ParseEndpoint("", 1).ok());
  CHECK_FALSE(ParseEndpoint("[]:1", 1).ok());
  CHECK_FALSE(ParseEndpoint("[::1]x", 1).ok());
  CHECK_FALSE(ParseEndpoint("h:", 1).ok());
  CHECK_FALSE(ParseEndpoint("h:0", 1).ok());  // port 0 only where the caller allows it
  auto z = ParseEndpoint("127.0.0.1:0", 1, /*allow_port_zero=*/true);
  REQUIRE(z.ok());
  CHECK(z->port == 0);
  CHECK(z->port_given);
}

TEST_CASE("ClosestSpelling", "[flags]") {
  CHECK(ClosestSpelling("--standalon") == "--standalone");
  CHECK(ClosestSpelling("--max_restart") == "--max_restarts");
  CHECK(ClosestSpelling("--rdzv-endpont") == "--rdzv-endpoint");
  CHECK(ClosestSpelling("--qqqqqqqqqqqqqqqqqqqq") == "");
  // a misspelt abbreviation: one edit from a longer spelling's start
  CHECK(ClosestSpelling("--nprocs") == "--nproc-per-node");
  CHECK(ClosestSpelling("--nnodez") == "--nnodes");
}

TEST_CASE("ResolveFlag: exact, a unique prefix, an ambiguous prefix, unknown", "[flags]") {
  CHECK(*ResolveFlag("--nproc-per-node") == FindFlag("--nproc-per-node"));
  CHECK(*ResolveFlag("--npr") == FindFlag("--nproc-per-node"));
  CHECK(*ResolveFlag("--nproc_") == FindFlag("--nproc-per-node"));
  CHECK(*ResolveFlag("-r") == FindFlag("--redirects"));
  for (std::string_view typed : {"--rdzv", "--no", "--"}) {
    INFO(typed);
    auto r = ResolveFlag(typed);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
  }
  CHECK(ResolveFlag("--no").status().message() ==
        "ambiguous flag '--no' could match --node-rank, --no-python, --no-agent-store (write more of it)");
  CHECK(ResolveFlag("--n").status().message() ==
        "ambiguous flag '--n' could match --nnodes, --nproc-per-node, --node-rank, --no-python, --numa-binding, "
        "--no-agent-store (write more of it)");
  CHECK(!ResolveFlag("-re").ok());  // short flags are never prefixes
  // every spelling's every prefix either resolves to its own row or is refused as ambiguous
  for (const FlagSpec& flag : Flags()) {
    for (std::string_view s : flag.spellings) {
      for (size_t n = 3; n <= s.size() && s.rfind("--", 0) == 0; ++n) {
        auto r = ResolveFlag(s.substr(0, n));
        INFO(s.substr(0, n));
        if (r.ok()) {  // its own row, or another flag spelt exactly so (--health-check of --health-check-...)
          CHECK((*r == &flag || *r == FindFlag(s.substr(0, n))));
        } else {
          CHECK(r.status().message().rfind("ambiguous flag", 0) == 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ctrun::launcher
