// What the agent starts for one attempt (launcher/agent/worker_specs.h):
// each worker's spec and its output tees' plan, from the command line, the
// round, the restart count and the log directory.
#include "launcher/agent/worker_specs.h"

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

namespace ctrun::launcher {
namespace {

std::string SpecEnvValue(const WorkerSpec& spec, const std::string& key) {
  for (const std::string& kv : spec.env) {
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "<unset>";
}

class SpecsFixture {
 public:
  SpecsFixture() {
    char tmpl[] = "/tmp/ctrun_worker_specs_test_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    config.nproc_per_node = 2;
    config.no_python = true;
    config.script = "/bin/echo";
    config.script_args = {"hi"};
    Result<RunLogDir> made = RunLogDir::Create(dir_ + "/logs", "specs");
    REQUIRE(made.ok());
    log_dir.emplace(std::move(*made));
    round.round = 3;
    round.group_rank = 1;
    round.local_world_sizes = {2, 2};
    round.master_addr = "10.0.0.1";
    round.master_port = 29400;
    round.run_id = "specs";
  }
  ~SpecsFixture() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  AttemptInputs Inputs() const { return AttemptInputs{config, env, *log_dir, restart_count, bindings}; }
  std::vector<WorkerRanks> Ranks() const { return AssignRanks(round.group_rank, round.local_world_sizes); }
  std::vector<WorkerSpec> Specs() const { return MakeWorkerSpecs(Inputs(), round, Ranks()); }
  TeePlan Plan() const { return MakeTeePlan(Inputs(), Ranks()); }

  LaunchConfig config;
  Environment env{{"PATH", "/usr/bin"}};
  std::optional<RunLogDir> log_dir;
  Round round;
  int restart_count = 2;
  std::vector<WorkerBinding> bindings;

 private:
  std::string dir_;
};

TEST_CASE_METHOD(SpecsFixture, "worker specs: one per local rank, with its ranks, round and attempt in its env") {
  const std::vector<WorkerSpec> specs = Specs();
  REQUIRE(specs.size() == 2);
  for (int lr = 0; lr < 2; ++lr) {
    const WorkerSpec& s = specs[lr];
    CHECK(s.local_rank == lr);
    CHECK(s.argv == std::vector<std::string>{"/bin/echo", "hi"});
    CHECK(SpecEnvValue(s, "RANK") == std::to_string(2 + lr));
    CHECK(SpecEnvValue(s, "GROUP_RANK") == "1");
    CHECK(SpecEnvValue(s, "MASTER_ADDR") == "10.0.0.1");
    CHECK(SpecEnvValue(s, "MASTER_PORT") == "29400");
    CHECK(SpecEnvValue(s, "TORCHELASTIC_RESTART_COUNT") == "2");
    CHECK(SpecEnvValue(s, "TORCHELASTIC_ERROR_FILE") == log_dir->ErrorFile(2, lr));
    CHECK(SpecEnvValue(s, "CTRUN_EXCLUDE_NODE_FILE") == ExcludeNodeFile(*log_dir));
    CHECK(SpecEnvValue(s, "PATH") == "/usr/bin");
    CHECK(SpecEnvValue(s, "CTRUN_HEARTBEAT_FILE") == "<unset>");  // --heartbeat-timeout is off
    CHECK(s.out.mode == StdioTarget::Mode::kInherit);
    CHECK(s.err.mode == StdioTarget::Mode::kInherit);
    CHECK(s.binding.cpus.empty());
    CHECK(s.stacks_file == log_dir->StacksFile(2, lr));  // --hang-stacks-timeout's default is on
  }
  CHECK(ExcludeNodeFile(*log_dir) == log_dir->path() + "/exclude_node");
}

TEST_CASE_METHOD(SpecsFixture, "worker specs: heartbeat file, bindings and no stacks when asked") {
  config.heartbeat_timeout = Seconds(30);
  config.hang_stacks_timeout = Seconds(0);
  bindings = {WorkerBinding{{0, 1}, {0}, "CPUs 0-1"}};  // local rank 1 is not bound
  const std::vector<WorkerSpec> specs = Specs();
  REQUIRE(specs.size() == 2);
  CHECK(SpecEnvValue(specs[1], "CTRUN_HEARTBEAT_FILE") == HeartbeatFile(*log_dir, 2, 1));
  CHECK(HeartbeatFile(*log_dir, 2, 1) == log_dir->RankDir(2, 1) + "/heartbeat");
  CHECK(specs[0].binding.cpus == std::vector<int>{0, 1});
  CHECK(specs[1].binding.cpus.empty());
  CHECK(specs[0].stacks_file.empty());
}

TEST_CASE_METHOD(SpecsFixture, "worker specs: each stream's target: pipe, file, console or nowhere") {
  config.tee.all = 1;             // stdout tee'd
  config.redirects.all = 2;       // stderr to its file
  config.local_ranks_filter = std::set<int>{0};
  const std::vector<WorkerSpec> specs = Specs();
  CHECK(specs[0].out.mode == StdioTarget::Mode::kPipe);
  CHECK(specs[0].err.mode == StdioTarget::Mode::kFile);
  CHECK(specs[0].err.path == log_dir->StderrFile(2, 0));
  config.tee.all = 0;
  config.redirects.all = 0;
  const std::vector<WorkerSpec> quiet = Specs();
  CHECK(quiet[0].out.mode == StdioTarget::Mode::kInherit);
  CHECK(quiet[1].out.mode == StdioTarget::Mode::kNull);  // off the console, no file
  config.duplicate_stderr_filters = {"NCCL"};
  CHECK(Specs()[1].err.mode == StdioTarget::Mode::kPipe);  // piped for the filter alone
}

TEST_CASE_METHOD(SpecsFixture, "tee plan: a tee'd stream goes to its file and the console, prefixed") {
  config.tee.all = 3;
  const TeePlan plan = Plan();
  REQUIRE(plan.streams.size() == 4);
  CHECK(plan.filtered_stdout_file.empty());
  CHECK(plan.filtered_stderr_file.empty());
  for (size_t i = 0; i < plan.streams.size(); ++i) {
    const TeeStream& s = plan.streams[i];
    const int lr = static_cast<int>(i / 2);
    CHECK(s.worker == i / 2);
    CHECK(s.is_stderr == (i % 2 == 1));
    CHECK(s.file == (s.is_stderr ? log_dir->StderrFile(2, lr) : log_dir->StdoutFile(2, lr)));
    CHECK(s.to_console);
    CHECK(s.prefix_console);
    CHECK(s.prefix == "[default" + std::to_string(lr) + "]:");
  }
}

TEST_CASE_METHOD(SpecsFixture, "tee plan: a stream piped for a filter goes where it would have gone, unprefixed") {
  config.duplicate_stdout_filters = {"loss"};
  config.redirects.per_rank = {{1, 1}};  // local rank 1's stdout to its file
  config.local_ranks_filter = std::set<int>{0};
  const TeePlan plan = Plan();
  CHECK(plan.stdout_filters == std::vector<std::string>{"loss"});
  CHECK(plan.filtered_stdout_file == log_dir->FilteredStdoutFile(2));
  CHECK(plan.filtered_stderr_file.empty());
  const TeeStream& out0 = plan.streams[0];
  CHECK(out0.file.empty());
  CHECK(out0.to_console);
  CHECK_FALSE(out0.prefix_console);
  const TeeStream& out1 = plan.streams[2];
  CHECK(out1.file == log_dir->StdoutFile(2, 1));
  CHECK_FALSE(out1.to_console);
}

TEST_CASE_METHOD(SpecsFixture, "--dedup-logs pipes every stream that reaches the console, and only those") {
  config.dedup_logs = true;
  config.redirects.per_rank = {{1, 2}};  // local rank 1's stderr to its file only
  const std::vector<WorkerSpec> specs = Specs();
  CHECK(specs[0].out.mode == StdioTarget::Mode::kPipe);
  CHECK(specs[0].err.mode == StdioTarget::Mode::kPipe);
  CHECK(specs[1].out.mode == StdioTarget::Mode::kPipe);
  CHECK(specs[1].err.mode == StdioTarget::Mode::kFile);
  config.local_ranks_filter = std::set<int>{0};
  CHECK(Specs()[1].out.mode == StdioTarget::Mode::kNull);  // off the console
  const TeePlan plan = Plan();
  CHECK(plan.dedup_logs);
  REQUIRE(plan.streams.size() == 4);
  CHECK(plan.streams[0].local_rank == 0);
  CHECK(plan.streams[3].local_rank == 1);
  CHECK(plan.streams[0].to_console);
  CHECK_FALSE(plan.streams[0].prefix_console);  // not tee'd: a lone line prints as written
  CHECK(plan.streams[0].file.empty());          // no file without --tee or --redirects
}

TEST_CASE_METHOD(SpecsFixture, "--share-logs pipes every stream, each tee knowing its worker's global rank") {
  config.share_logs = true;
  config.redirects.per_rank = {{1, 2}};   // to its file only: still read, to ship it
  config.local_ranks_filter = std::set<int>{0};  // off the console: still read
  const std::vector<WorkerSpec> specs = Specs();
  for (const WorkerSpec& spec : specs) {
    CHECK(spec.out.mode == StdioTarget::Mode::kPipe);
    CHECK(spec.err.mode == StdioTarget::Mode::kPipe);
  }
  const TeePlan plan = Plan();
  CHECK(plan.shipper == nullptr);  // the agent sets it
  REQUIRE(plan.streams.size() == 4);
  const std::vector<WorkerRanks> ranks = Ranks();
  CHECK(plan.streams[0].rank == ranks[0].rank);
  CHECK(plan.streams[3].rank == ranks[1].rank);
  CHECK_FALSE(plan.streams[3].file.empty());  // local rank 1's stderr still goes to its file
  CHECK_FALSE(plan.streams[2].to_console);  // local rank 1 is off the console
  CHECK(plan.streams[0].to_console);
  CHECK_FALSE(plan.streams[0].prefix_console);  // not tee'd: the console gets it as written
}

TEST_CASE_METHOD(SpecsFixture, "worker specs: the console filter and bindings by local rank") {
  CHECK(OnConsole(config, 1));
  config.local_ranks_filter = std::set<int>{1};
  CHECK_FALSE(OnConsole(config, 0));
  CHECK(OnConsole(config, 1));
  bindings = {WorkerBinding{{4}, {0}, "CPU 4"}};
  CHECK(BindingOf(bindings, 0) == &bindings[0]);
  CHECK(BindingOf(bindings, 1) == nullptr);
  CHECK(BindingOf(bindings, -1) == nullptr);
}

}  // namespace
}  // namespace ctrun::launcher
