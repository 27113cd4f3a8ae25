// The agent under test with a scripted worker group, health checker and
// rendezvous (tests/launcher/agent_test.cc, agent_health_test.cc): events
// in, actions out; the agent's io_context is only polled. Test code: each
// test file includes it once.
#pragma once

#include "launcher/agent/agent.h"

#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>


namespace ctrun::launcher {
namespace agent_testing {


using Json = nlohmann::json;

// The worker group as the agent sees it: Start and Close are recorded, exits
// and the end of a close happen when the test says so.
class FakeWorkers : public WorkerGroup {
 public:
  Status Start(const std::vector<WorkerSpec>& specs, ExitHandler on_exit,
               std::vector<std::pair<int, int>>* pipes) override {
    ++starts;
    last_specs = specs;
    pipes->assign(specs.size(), {-1, -1});
    if (!start_status.ok()) return start_status;
    on_exit_ = std::move(on_exit);
    pids_.clear();
    running_.clear();
    for (const WorkerSpec& s : specs) {
      pids_.push_back(next_pid_++);
      running_.insert(s.local_rank);
    }
    return Status::Ok();
  }

  void Close(int sig, Duration, Duration kill_timeout, CloseHandler done) override {
    close_signals.push_back(sig);
    last_kill_timeout = kill_timeout;
    close_done_ = std::move(done);
  }

  std::vector<pid_t> Pids() const override { return pids_; }

  // Worker `local_rank` exits with `code` (< 0: killed by signal -code).
  void Exit(int local_rank, int code) {
    REQUIRE(running_.erase(local_rank) == 1);
    on_exit_(WorkerExit{local_rank, pids_[local_rank], code, 0});
  }

  // The close completes: the workers still running die of the signal Close
  // sent last, then Close's `done` runs, as WorkerSet does.
  void FinishClose() {
    REQUIRE(close_done_);
    const int sig = close_signals.back();
    while (!running_.empty()) Exit(*running_.begin(), -sig);
    auto done = std::move(close_done_);
    close_done_ = nullptr;
    done({});
  }

  // The close gives up after its kill timeout: `stuck` outlived SIGKILL and
  // the workers still running are never reported as exited.
  void GiveUpClose(const std::vector<StuckProcess>& stuck) {
    REQUIRE(close_done_);
    auto done = std::move(close_done_);
    close_done_ = nullptr;
    done(stuck);
  }

  bool closing() const { return close_done_ != nullptr; }

  int starts = 0;
  std::vector<WorkerSpec> last_specs;
  std::vector<int> close_signals;
  Duration last_kill_timeout{};
  Status start_status;

 private:
  ExitHandler on_exit_;
  CloseHandler close_done_;
  std::vector<pid_t> pids_;
  std::set<int> running_;
  pid_t next_pid_ = 1000;
};

// The health check as the agent sees it: runs are recorded, results come
// when the test says so.
class FakeHealth : public HealthChecker {
 public:
  void Run(Done done) override {
    REQUIRE(!done_);
    ++runs;
    done_ = std::move(done);
  }
  void Cancel() override {
    if (done_) ++cancels;
    done_ = nullptr;
  }
  const std::string& command() const override { return command_; }

  void Answer(bool healthy, std::vector<std::string> lines = {}) {
    REQUIRE(done_);
    HealthResult r;
    r.healthy = healthy;
    if (!healthy) r.failure = "exited with 1";
    r.last_lines = std::move(lines);
    auto done = std::move(done_);
    done_ = nullptr;
    done(r);
  }
  bool pending() const { return done_ != nullptr; }

  int runs = 0;
  int cancels = 0;

 private:
  Done done_;
  std::string command_ = "check.sh";
};

// A one-node rendezvous whose rounds complete, and whose membership changes,
// when the test says so.
class FakeRendezvous : public RendezvousHandler {
 public:
  void NextRound(std::function<void(Result<Round>)> done) override {
    ++rounds_asked;
    next_ = std::move(done);
  }
  void OnChange(ChangeCallback cb) override { change_ = std::move(cb); }
  void Shutdown(ShutdownReason reason, std::function<void()> done) override {
    shutdown = reason;
    if (hold_shutdown) {
      leave_ = std::move(done);  // the leave completes when the test says so
      return;
    }
    done();
  }
  bool leaving() const { return leave_ != nullptr; }
  // A held leave (hold_shutdown) completes.
  void FinishLeave() {
    REQUIRE(leave_);
    auto done = std::move(leave_);
    leave_ = nullptr;
    done();
  }

  // The round asked for completes with this node alone, `nproc` workers.
  void CompleteRound(int nproc) {
    Round r;
    r.round = rounds_asked;
    r.local_world_sizes = {nproc};
    r.master_addr = "127.0.0.1";
    r.master_port = 29500;
    r.run_id = "agent_test";
    Answer(r);
  }
  void Answer(Result<Round> round) {
    REQUIRE(next_);
    auto done = std::move(next_);
    next_ = nullptr;
    done(std::move(round));
  }
  void ChangeMembership(bool charged, const std::string& why) { change_(charged, why); }
  bool waiting() const { return next_ != nullptr; }
  void SetUnhealthyReport(const std::string& report) override { unhealthy_report = report; }

  int rounds_asked = 0;
  std::optional<ShutdownReason> shutdown;
  std::string unhealthy_report;
  bool hold_shutdown = false;

 private:
  std::function<void(Result<Round>)> next_;
  std::function<void()> leave_;
  ChangeCallback change_;
};

class AgentFixture {
 public:
  AgentFixture() {
    char tmpl[] = "/tmp/ctrun_agent_test_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    config.nproc_per_node = 2;
    config.no_python = true;
    config.script = "/bin/true";
    config.log_dir = dir_ + "/logs";
  }
  ~AgentFixture() {
    agent_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Builds the agent from `config` and starts it: it asks for a round.
  void Start() {
    Result<RunLogDir> log_dir = RunLogDir::Create(config.log_dir, config.rdzv_id);
    REQUIRE(log_dir.ok());
    Result<std::unique_ptr<EventLog>> events = EventLog::Open(dir_ + "/events.jsonl", "test", "node0#7");
    REQUIRE(events.ok());
    events_ = std::move(*events);
    agent_ = std::make_unique<Agent>(io, config, Environment{}, rdzv, workers,
                                     std::move(*log_dir), nullptr, events_.get());
    agent_->SetWorkerBindings(bindings);
    agent_->SetHealthCheck(health);
    agent_->Start();
    Poll();
  }

  // Starts the agent and completes its first round: the group runs.
  void StartRunning() {
    Start();
    rdzv.CompleteRound(config.nproc_per_node);
    Poll();
    REQUIRE(agent().state() == Agent::State::kRunning);
  }

  void Poll() {
    if (!io.stopped()) io.poll();
  }

  Agent& agent() { return *agent_; }

  // Every event written so far, in order.
  std::vector<Json> Events() const {
    std::vector<Json> out;
    std::ifstream in(dir_ + "/events.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
    return out;
  }
  std::vector<std::string> EventNames() const {
    std::vector<std::string> names;
    for (const Json& e : Events()) names.push_back(e["event"].get<std::string>());
    return names;
  }
  // The events named `name`, in order.
  std::vector<Json> EventsNamed(const std::string& name) const {
    std::vector<Json> out;
    for (const Json& e : Events()) {
      if (e["event"] == name) out.push_back(e);
    }
    return out;
  }

  // The agent finished: `io` was stopped, with `code` and `state`.
  void CheckFinished(Agent::State state, int code, ShutdownReason reason) {
    CHECK(io.stopped());
    CHECK(agent().state() == state);
    CHECK(agent().exit_code() == code);
    REQUIRE(rdzv.shutdown.has_value());
    CHECK(*rdzv.shutdown == reason);
    const std::vector<Json> events = Events();
    REQUIRE(!events.empty());
    CHECK(events.back()["event"] == "finished");
    CHECK(events.back()["exit_code"] == code);
  }

  boost::asio::io_context io;
  LaunchConfig config;
  FakeRendezvous rdzv;
  FakeWorkers workers;
  std::vector<WorkerBinding> bindings;  // --numa-binding, per local rank
  HealthChecker* health = nullptr;      // --health-check; set before Start

 private:
  std::string dir_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<Agent> agent_;
};

}  // namespace agent_testing
}  // namespace ctrun::launcher
