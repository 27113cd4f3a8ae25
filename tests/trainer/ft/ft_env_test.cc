// ReadFtEnv (ft_env.h): the worker's --ft environment from its agent.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "trainer/ft/ft_env.h"

namespace ft = ctrun::trainer::ft;

namespace {
ft::EnvReader From(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("ReadFtEnv: the agent's variables, with defaults for host and group") {
  auto env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@sock"}, {"CTRUN_FT_REPLICAS", "1:3"}}));
  REQUIRE(env.ok());
  CHECK(env->socket == "@sock");
  CHECK(env->host == "127.0.0.1");
  CHECK(env->group == "0");
  CHECK(env->max_replicas == 3);
  env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@s"}, {"CTRUN_FT_HOST", "10.0.0.2"}, {"CTRUN_FT_GROUP", "g7"},
                            {"CTRUN_FT_REPLICAS", "2:2"}}));
  REQUIRE(env.ok());
  CHECK(env->host == "10.0.0.2");
  CHECK(env->group == "g7");
  CHECK(env->max_replicas == 2);
}

TEST_CASE("ReadFtEnv: no socket, or replicas that are not MIN:MAX") {
  CHECK(ft::ReadFtEnv(From({})).status().message() == "--ft needs ctrun --ft-replicas");
  CHECK(ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", ""}})).status().message() == "--ft needs ctrun --ft-replicas");
  for (const char* bad : {"", "3", "1:", "1:0", "1:x", "1:3x", "1:2000000"}) {
    auto env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@s"}, {"CTRUN_FT_REPLICAS", bad}}));
    CHECK(env.status().IsInvalidArgument());
    CHECK(env.status().message() ==
          std::string("CTRUN_FT_REPLICAS '") + bad + "': need MIN:MAX (set by ctrun --ft-replicas)");
  }
}

TEST_CASE("ReadFtEnv: CTRUN_FT_FIXED_STALL is 1 or unset") {
  auto env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@s"}, {"CTRUN_FT_REPLICAS", "1:3"}}));
  REQUIRE(env.ok());
  CHECK_FALSE(env->fixed_stall);
  env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@s"}, {"CTRUN_FT_REPLICAS", "1:3"}, {"CTRUN_FT_FIXED_STALL", "1"}}));
  REQUIRE(env.ok());
  CHECK(env->fixed_stall);
  env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@s"}, {"CTRUN_FT_REPLICAS", "1:3"}, {"CTRUN_FT_FIXED_STALL", "yes"}}));
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().message() == "CTRUN_FT_FIXED_STALL 'yes': set it to 1 or leave it unset");
}

TEST_CASE("ReadFtEnv: CTRUN_FT_EXACT is 1 or unset") {
  auto env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@s"}, {"CTRUN_FT_REPLICAS", "1:3"}}));
  REQUIRE(env.ok());
  CHECK_FALSE(env->exact);
  env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@s"}, {"CTRUN_FT_REPLICAS", "1:3"}, {"CTRUN_FT_EXACT", "1"}}));
  REQUIRE(env.ok());
  CHECK(env->exact);
  env = ft::ReadFtEnv(From({{"CTRUN_FT_SOCKET", "@s"}, {"CTRUN_FT_REPLICAS", "1:3"}, {"CTRUN_FT_EXACT", "true"}}));
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().message() == "CTRUN_FT_EXACT 'true': set it to 1 (ctrun --ft-exact) or leave it unset");
}
