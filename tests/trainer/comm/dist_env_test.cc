#include <catch2/catch.hpp>

#include <map>

#include "trainer/comm/dist_env.h"

namespace ct = ctrun::trainer;

namespace {

ct::EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> Launched() {
  return {{"RANK", "1"},        {"WORLD_SIZE", "4"},         {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29511"},
          {"TORCHELASTIC_USE_AGENT_STORE", "False"}, {"TORCHELASTIC_RESTART_COUNT", "3"}};
}

}  // namespace

TEST_CASE("ReadDistEnv reads what ctrun exports") {
  auto env = ct::ReadDistEnv(Env(Launched()));
  REQUIRE(env.ok());
  CHECK(env->rank == 1);
  CHECK(env->world_size == 4);
  CHECK(env->local_rank == 1);
  CHECK(env->local_world_size == 2);
  CHECK(env->master_addr == "127.0.0.1");
  CHECK(env->master_port == 29511);
  CHECK_FALSE(env->use_agent_store);
  CHECK(env->restart_count == 3);
}

TEST_CASE("ReadDistEnv: agent store uses torchrun's attempt prefix") {
  auto vars = Launched();
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  auto env = ct::ReadDistEnv(Env(vars));
  REQUIRE(env.ok());
  CHECK(env->use_agent_store);
  CHECK(env->StorePrefix() == "/worker/attempt_3");
}

TEST_CASE("ReadDistEnv: not launched names the missing variables") {
  auto env = ct::ReadDistEnv(Env({{"RANK", "0"}}));
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().code() == ctrun::Status::Code::kFailedPrecondition);
  const std::string& message = env.status().message();
  CHECK(message.find("WORLD_SIZE, MASTER_ADDR, MASTER_PORT") != std::string::npos);
  CHECK(message.find("ctrun") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("ReadDistEnv: local defaults when LOCAL_* unset") {
  auto vars = Launched();
  vars.erase("LOCAL_RANK");
  vars.erase("LOCAL_WORLD_SIZE");
  vars.erase("TORCHELASTIC_USE_AGENT_STORE");
  vars.erase("TORCHELASTIC_RESTART_COUNT");
  auto env = ct::ReadDistEnv(Env(vars));
  REQUIRE(env.ok());
  CHECK(env->local_rank == 0);
  CHECK(env->local_world_size == 4);
  CHECK_FALSE(env->use_agent_store);
  CHECK(env->restart_count == 0);
}

TEST_CASE("ReadDistEnv rejects bad values with one line naming them") {
  struct Case {
    const char* name;
    const char* value;
    const char* needle;
  };
  for (const Case& c : {Case{"RANK", "4", "RANK=4"}, Case{"RANK", "x", "RANK='x'"},
                        Case{"WORLD_SIZE", "0", "WORLD_SIZE=0"},
                        Case{"MASTER_PORT", "70000", "MASTER_PORT=70000"},
                        Case{"MASTER_PORT", "12a", "MASTER_PORT='12a'"},
                        Case{"LOCAL_RANK", "2", "LOCAL_RANK=2"},
                        Case{"TORCHELASTIC_USE_AGENT_STORE", "maybe", "'maybe'"},
                        Case{"MASTER_ADDR", "", "MASTER_ADDR is empty"}}) {
    auto vars = Launched();
    vars[c.name] = c.value;
    auto env = ct::ReadDistEnv(Env(vars));
    INFO(c.name << "=" << c.value);
    REQUIRE_FALSE(env.ok());
    CHECK(env.status().IsInvalidArgument());
    CHECK(env.status().message().find(c.needle) != std::string::npos);
  }
}
