#include "launcher/process/worker_env.h"

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

RoundEnv SomeRound() {
  RoundEnv round;
  round.master_addr = "10.0.0.1";
  round.master_port = 29500;
  round.restart_count = 2;
  round.max_restarts = 3;
  round.run_id = "job42";
  round.use_agent_store = true;
  round.role = "trainer";
  round.signals_to_handle_names = {"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"};
  return round;
}

std::vector<int> Ranks(const std::vector<WorkerRanks>& ranks) {
  std::vector<int> out;
  for (const auto& r : ranks) out.push_back(r.rank);
  return out;
}

TEST_CASE("Homogeneous nodes get RANK = GROUP_RANK * nproc + LOCAL_RANK") {
  std::vector<WorkerRanks> ranks = AssignRanks(1, {4, 4, 4});
  REQUIRE(ranks.size() == 4);
  CHECK(Ranks(ranks) == std::vector<int>{4, 5, 6, 7});
  for (int i = 0; i < 4; ++i) {
    CHECK(ranks[i].local_rank == i);
    CHECK(ranks[i].group_rank == 1);
    CHECK(ranks[i].group_world_size == 3);
    CHECK(ranks[i].local_world_size == 4);
    CHECK(ranks[i].world_size == 12);
    CHECK(ranks[i].role_rank == ranks[i].rank);
    CHECK(ranks[i].role_world_size == 12);
  }
}

TEST_CASE("Heterogeneous nodes offset by the sizes of lower group ranks") {
  const std::vector<int> lws = {2, 3, 1};
  CHECK(Ranks(AssignRanks(0, lws)) == std::vector<int>{0, 1});
  CHECK(Ranks(AssignRanks(1, lws)) == std::vector<int>{2, 3, 4});
  std::vector<WorkerRanks> last = AssignRanks(2, lws);
  REQUIRE(last.size() == 1);
  CHECK(last[0].rank == 5);
  CHECK(last[0].local_world_size == 1);
  CHECK(last[0].world_size == 6);
  CHECK(last[0].role_world_size == 6);
  CHECK(last[0].group_world_size == 3);
}

TEST_CASE("A single node's ranks equal its local ranks") {
  std::vector<WorkerRanks> ranks = AssignRanks(0, {2});
  CHECK(Ranks(ranks) == std::vector<int>{0, 1});
  CHECK(ranks[1].world_size == 2);
}

TEST_CASE("Invalid rank layouts give no ranks") {
  CHECK(AssignRanks(3, {1, 1}).empty());
  CHECK(AssignRanks(-1, {1}).empty());
  CHECK(AssignRanks(0, {}).empty());
  CHECK(AssignRanks(0, {2, -1}).empty());
}

TEST_CASE("The worker environment carries every torchrun variable") {
  WorkerRanks ranks = AssignRanks(1, {2, 3})[2];
  Environment env = BuildWorkerEnv({}, ranks, SomeRound(), "/logs/attempt_2/2/error.json");
  const Environment expected = {
      {"LOCAL_RANK", "2"},
      {"RANK", "4"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_RANK", "4"},
      {"ROLE_NAME", "trainer"},
      {"ROLE_WORLD_SIZE", "5"},
      {"LOCAL_WORLD_SIZE", "3"},
      {"WORLD_SIZE", "5"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RESTART_COUNT", "2"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_RUN_ID", "job42"},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},
      {"TORCHELASTIC_ERROR_FILE", "/logs/attempt_2/2/error.json"},
  };
  CHECK(env == expected);
}

TEST_CASE("USE_AGENT_STORE is Python's False when the agent hosts no store") {
  RoundEnv round = SomeRound();
  round.use_agent_store = false;
  Environment env = BuildWorkerEnv({}, AssignRanks(0, {1})[0], round, "e");
  CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "False");
}

TEST_CASE("An empty signal list is still exported") {
  RoundEnv round = SomeRound();
  round.signals_to_handle_names.clear();
  Environment env = BuildWorkerEnv({}, AssignRanks(0, {1})[0], round, "e");
  CHECK(env.at("TORCHELASTIC_SIGNALS_TO_HANDLE").empty());
}

TEST_CASE("The agent's own variables pass through untouched") {
  const Environment base = {
      {"PATH", "/usr/bin"},
      {"CUDA_VISIBLE_DEVICES", "3,1"},
      {"OMP_NUM_THREADS", "8"},
      {"TORCHELASTIC_TIMER_FILE", "/tmp/timer"},
      {"EMPTY", ""},
  };
  Environment env = BuildWorkerEnv(base, AssignRanks(0, {2})[1], SomeRound(), "e");
  for (const auto& [name, value] : base) {
    INFO(name);
    CHECK(env.at(name) == value);
  }
}

TEST_CASE("torchrun's variables override the agent's variables of the same name") {
  const Environment base = {
      {"RANK", "99"},
      {"LOCAL_RANK", "99"},
      {"WORLD_SIZE", "99"},
      {"MASTER_ADDR", "elsewhere"},
      {"TORCHELASTIC_ERROR_FILE", "/scheduler/error.json"},
      {"TORCHELASTIC_RESTART_COUNT", "7"},
  };
  Environment env = BuildWorkerEnv(base, AssignRanks(0, {2})[1], SomeRound(), "/mine.json");
  CHECK(env.at("RANK") == "1");
  CHECK(env.at("LOCAL_RANK") == "1");
  CHECK(env.at("WORLD_SIZE") == "2");
  CHECK(env.at("MASTER_ADDR") == "10.0.0.1");
  CHECK(env.at("TORCHELASTIC_ERROR_FILE") == "/mine.json");
  CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "2");
}

// torch 2.x's torchrun sets only the TORCH_ spelling; torch 2.x warns on
// every rank when it finds the bare one (seen on an H100 with torch 2.11), so
// ctrun never adds it: a user's own value passes through.
TEST_CASE("NCCL async error handling: the torch 2.x spelling is inherited or 1, the bare one only passed through") {
  const WorkerRanks ranks = AssignRanks(0, {1})[0];
  SECTION("neither set") {
    Environment env = BuildWorkerEnv({}, ranks, SomeRound(), "e");
    CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
    CHECK(env.count("NCCL_ASYNC_ERROR_HANDLING") == 0);
  }
  SECTION("both set") {
    Environment env = BuildWorkerEnv(
        {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}, {"NCCL_ASYNC_ERROR_HANDLING", "0"}}, ranks,
        SomeRound(), "e");
    CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
    CHECK(env.at("NCCL_ASYNC_ERROR_HANDLING") == "0");
  }
  SECTION("only the bare (torch 1.x) spelling set") {
    Environment env = BuildWorkerEnv({{"NCCL_ASYNC_ERROR_HANDLING", "2"}}, ranks, SomeRound(), "e");
    CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
    CHECK(env.at("NCCL_ASYNC_ERROR_HANDLING") == "2");
  }
}

TEST_CASE("OMP_NUM_THREADS warning only when unset and more than one worker") {
  // torch 1.13 torch/distributed/run.py, config_from_args, printed by repr().
  const std::string kTorchText =
      "\n*****************************************\nSetting OMP_NUM_THREADS environment "
      "variable for each process to be 1 in default, to avoid your system being overloaded, "
      "please further tune the variable for optimal performance in your application as "
      "needed. \n*****************************************";
  std::optional<std::string> warning = OmpNumThreadsWarning({{"PATH", "/bin"}}, 2);
  REQUIRE(warning.has_value());
  CHECK(*warning == kTorchText);
  CHECK_FALSE(OmpNumThreadsWarning({}, 1).has_value());
  CHECK_FALSE(OmpNumThreadsWarning({{"OMP_NUM_THREADS", "4"}}, 8).has_value());
  CHECK_FALSE(OmpNumThreadsWarning({{"OMP_NUM_THREADS", ""}}, 8).has_value());
}

TEST_CASE("ToEnvStrings gives NAME=value in name order") {
  CHECK(ToEnvStrings({{"B", "x=y"}, {"A", ""}}) == std::vector<std::string>{"A=", "B=x=y"});
  CHECK(ToEnvStrings({}).empty());
}

TEST_CASE("ToEnvStrings of a base and overrides: the union in name order, overrides winning") {
  const Environment base{{"A", "1"}, {"C", "base"}, {"E", "5"}};
  CHECK(ToEnvStrings(base, {{"B", "2"}, {"C", "over"}, {"F", "6"}}) ==
        std::vector<std::string>{"A=1", "B=2", "C=over", "E=5", "F=6"});
  CHECK(ToEnvStrings(base, {}) == ToEnvStrings(base));
  CHECK(ToEnvStrings({}, base) == ToEnvStrings(base));
  CHECK(ToEnvStrings({{"Z", "z"}}, {{"A", "a"}}) == std::vector<std::string>{"A=a", "Z=z"});
}

TEST_CASE("A worker's strings from the overrides equal those of BuildWorkerEnv") {
  const Environment base{{"PATH", "/bin"}, {"RANK", "stale"}, {"CUDA_VISIBLE_DEVICES", "4,5"},
                         {"NCCL_ASYNC_ERROR_HANDLING", "0"}, {"ZZ", "last"}};
  RoundEnv round = SomeRound();
  for (bool virtual_local_rank : {false, true}) {
    round.virtual_local_rank = virtual_local_rank;
    for (const WorkerRanks& r : AssignRanks(1, {2, 2})) {
      CHECK(ToEnvStrings(base, WorkerEnvOverrides(base, r, round, "/e", "/hb")) ==
            ToEnvStrings(BuildWorkerEnv(base, r, round, "/e", "/hb")));
    }
  }
}

}  // namespace
TEST_CASE("Virtual local rank: LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES narrowed as torch narrows it") {
  RoundEnv round = SomeRound();
  round.virtual_local_rank = true;
  const std::vector<WorkerRanks> ranks = AssignRanks(1, {3, 3});
  // No CUDA_VISIBLE_DEVICES: the device is the local rank; RANK stays global.
  for (const WorkerRanks& r : ranks) {
    Environment env = BuildWorkerEnv({}, r, round, "/e");
    CHECK(env.at("LOCAL_RANK") == "0");
    CHECK(env.at("CUDA_VISIBLE_DEVICES") == std::to_string(r.local_rank));
    CHECK(env.at("RANK") == std::to_string(3 + r.local_rank));
    CHECK(env.at("LOCAL_WORLD_SIZE") == "3");
  }
  // An inherited list is indexed by local rank, entries trimmed (UUIDs and MIG ids too).
  const Environment base = {{"CUDA_VISIBLE_DEVICES", "4, GPU-8f2e ,MIG-1/2/3"}};
  CHECK(BuildWorkerEnv(base, ranks[0], round, "/e").at("CUDA_VISIBLE_DEVICES") == "4");
  CHECK(BuildWorkerEnv(base, ranks[1], round, "/e").at("CUDA_VISIBLE_DEVICES") == "GPU-8f2e");
  CHECK(BuildWorkerEnv(base, ranks[2], round, "/e").at("CUDA_VISIBLE_DEVICES") == "MIG-1/2/3");
  // Off: LOCAL_RANK is the local rank and the list passes through whole.
  round.virtual_local_rank = false;
  Environment plain = BuildWorkerEnv(base, ranks[2], round, "/e");
  CHECK(plain.at("LOCAL_RANK") == "2");
  CHECK(plain.at("CUDA_VISIBLE_DEVICES") == "4, GPU-8f2e ,MIG-1/2/3");
}

TEST_CASE("VirtualDevice and CheckVirtualLocalRank: too few devices is a one-line error") {
  CHECK(VirtualDevice({}, 7) == "7");
  CHECK(VirtualDevice({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 1) == "1");
  CHECK_FALSE(VirtualDevice({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 2));
  // Python's "".split(",") is [""]: one empty entry, which hides every GPU.
  CHECK(VirtualDevice({{"CUDA_VISIBLE_DEVICES", ""}}, 0) == "");
  CHECK_FALSE(VirtualDevice({{"CUDA_VISIBLE_DEVICES", ""}}, 1));
  CHECK(VirtualDevice({{"CUDA_VISIBLE_DEVICES", "0,,2"}}, 1) == "");

  CHECK(CheckVirtualLocalRank({}, 8).empty());
  CHECK(CheckVirtualLocalRank({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 2).empty());
  const std::string why = CheckVirtualLocalRank({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 3);
  CHECK(why ==
        "--virtual-local-rank: CUDA_VISIBLE_DEVICES='0,1' lists 2 device(s) for 3 workers (list one device per "
        "worker, lower --nproc-per-node, or unset CUDA_VISIBLE_DEVICES)");
}

}  // namespace ctrun::launcher
