// The agent's state machine with a scripted worker group and rendezvous:
// events in (a round completes, a worker exits, the membership changes, a
// signal, the group's close completes), actions out (workers started, Close
// with which signal, the next round asked for, the events file, the exit
// code, how the rendezvous was shut down). The agent's io_context is only
// polled: nothing here waits on time, processes or real signals.
#include "launcher/agent.h"

#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace ctrun::launcher {
namespace {

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

TEST_CASE_METHOD(AgentFixture, "agent: every worker exiting 0 stops the group and succeeds") {
  StartRunning();
  CHECK(workers.starts == 1);
  CHECK(workers.last_specs.size() == 2);
  workers.Exit(0, 0);
  CHECK(agent().state() == Agent::State::kRunning);
  workers.Exit(1, 0);
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
  CHECK(EventsNamed("restart").empty());
  for (const Json& e : Events()) CHECK(e["node_id"] == "node0#7");
}

TEST_CASE_METHOD(AgentFixture, "agent: each worker gets its --numa-binding at every start, and its events name it") {
  config.max_restarts = 1;
  bindings = {WorkerBinding{{0, 1}, {0}, "CPUs 0-1, memory preferred on NUMA node 0 (test)"},
              WorkerBinding{{2, 3}, {1}, "CPUs 2-3, memory preferred on NUMA node 1 (test)"}};
  StartRunning();
  for (int attempt = 0; attempt < 2; ++attempt) {
    REQUIRE(workers.last_specs.size() == 2);
    for (int lr = 0; lr < 2; ++lr) {
      CHECK(workers.last_specs[lr].binding.cpus == bindings[lr].cpus);
      CHECK(workers.last_specs[lr].binding.memory_nodes == bindings[lr].memory_nodes);
    }
    workers.Exit(1, 3);
    workers.FinishClose();
    if (attempt == 0) {
      rdzv.CompleteRound(2);
      Poll();
    }
  }
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  const std::vector<Json> started = EventsNamed("worker_started");
  REQUIRE(started.size() == 4);
  for (const Json& e : started) {
    const int lr = e["local_rank"].get<int>();
    CHECK(e["cpus"].get<std::vector<int>>() == bindings[lr].cpus);
    CHECK(e["memory_nodes"].get<std::vector<int>>() == bindings[lr].memory_nodes);
    CHECK(e["binding"] == bindings[lr].summary);
  }
}

TEST_CASE_METHOD(AgentFixture, "agent: without --numa-binding workers and events carry no binding") {
  StartRunning();
  for (const WorkerSpec& s : workers.last_specs) CHECK(s.binding.cpus.empty());
  for (const Json& e : EventsNamed("worker_started")) CHECK_FALSE(e.contains("cpus"));
}

TEST_CASE_METHOD(AgentFixture, "agent: a failed worker stops the group and restarts it, charged") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(1, 3);
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  CHECK(rdzv.rounds_asked == 1);  // no rendezvous before the group is gone
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(rdzv.rounds_asked == 2);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["cause"] == "worker_failed");
  CHECK(restarts[0]["charged"] == true);
  CHECK(restarts[0]["restart_count"] == 1);
  CHECK(restarts[0]["remaining_restarts"] == 0);

  rdzv.CompleteRound(2);
  Poll();
  CHECK(agent().state() == Agent::State::kRunning);
  CHECK(workers.starts == 2);
  workers.Exit(0, 0);
  workers.Exit(1, 0);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kSucceeded, kExitSuccess, ShutdownReason::kSucceeded);
}

TEST_CASE_METHOD(AgentFixture, "agent: with the restart budget spent, a failed worker fails the run") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(0, 3);
  workers.FinishClose();
  rdzv.CompleteRound(2);
  Poll();
  REQUIRE(workers.starts == 2);
  workers.Exit(0, 3);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(rdzv.rounds_asked == 2);
  CHECK(EventsNamed("restart").size() == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: --exit-code-from-root-cause exits with the failed worker's code") {
  config.exit_code_from_root_cause = true;
  StartRunning();
  workers.Exit(1, 7);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, 7, ShutdownReason::kFailed);
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal during a restart's stop lets it end, then exits for the signal") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(1, 1);
  REQUIRE(agent().state() == Agent::State::kStopping);
  agent().HandleSignal(SIGTERM);
  // The workers keep their SIGTERM and grace (e.g. to checkpoint): no new Close.
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(EventsNamed("restart").empty());
  CHECK(rdzv.rounds_asked == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: a second signal during a stop closes the group again at once") {
  StartRunning();
  agent().HandleSignal(SIGTERM);
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  agent().HandleSignal(SIGINT);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM, SIGINT});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGINT, ShutdownReason::kSignal);
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal while running stops the group with it and exits for it, whatever the workers exit with") {
  config.max_restarts = 3;
  StartRunning();
  agent().HandleSignal(SIGTERM);
  workers.Exit(0, 1);  // dies badly of the SIGTERM
  CHECK(agent().state() == Agent::State::kStopping);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(EventsNamed("restart").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal during the rendezvous exits at once; a late round is ignored") {
  Start();
  REQUIRE(agent().state() == Agent::State::kRendezvous);
  agent().HandleSignal(SIGINT);
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGINT, ShutdownReason::kSignal);
  rdzv.CompleteRound(2);
  CHECK(workers.starts == 0);
}

TEST_CASE_METHOD(AgentFixture, "agent: a lost node (membership changed, charged) stops the group and re-joins") {
  config.max_restarts = 1;
  StartRunning();
  rdzv.ChangeMembership(true, "node n2 was lost");
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(rdzv.rounds_asked == 2);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["cause"] == "membership_changed");
  CHECK(restarts[0]["charged"] == true);
  CHECK(restarts[0]["restart_count"] == 1);
  rdzv.CompleteRound(2);
  Poll();
  CHECK(agent().state() == Agent::State::kRunning);
  CHECK(workers.starts == 2);
}

TEST_CASE_METHOD(AgentFixture, "agent: a scale-up (membership changed, not charged) re-joins without spending the budget") {
  config.max_restarts = 0;
  StartRunning();
  rdzv.ChangeMembership(false, "a node is waiting to join");
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["charged"] == false);
  CHECK(restarts[0]["restart_count"] == 0);
}

TEST_CASE_METHOD(AgentFixture, "agent: a worker failure followed by the peer loss that caused it is not charged") {
  config.max_restarts = 0;
  StartRunning();
  workers.Exit(0, 1);  // the collective broke first
  rdzv.ChangeMembership(false, "node n2 left");
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);  // not failed: nothing was charged
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["cause"] == "membership_changed");
  CHECK(restarts[0]["charged"] == false);
}

TEST_CASE_METHOD(AgentFixture, "agent: membership changes outside kRunning start no stop") {
  Start();
  rdzv.ChangeMembership(true, "early");
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(workers.close_signals.empty());
  CHECK(EventsNamed("membership_changed").size() == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: a failed rendezvous fails the run") {
  Start();
  rdzv.Answer(Status::DeadlineExceeded("join timeout"));
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(EventsNamed("rendezvous_failed").size() == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: workers that cannot start fail the run") {
  workers.start_status = Status::NotFound("cannot run '/nonexistent'");
  Start();
  rdzv.CompleteRound(2);
  CheckFinished(Agent::State::kFailed, kExitFailure, ShutdownReason::kFailed);
  CHECK(workers.close_signals.empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: the events of one failed-then-restarted round, in order") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(1, 1);
  workers.FinishClose();
  Poll();
  CHECK(EventNames() == std::vector<std::string>{
                            "rendezvous_started", "round_complete", "worker_started",
                            "worker_started", "worker_exited", "worker_exited", "restart",
                            "rendezvous_started"});
  const std::vector<Json> exits = EventsNamed("worker_exited");
  CHECK(exits[0]["during"] == "running");
  CHECK(exits[1]["during"] == "stopping");
  CHECK(exits[1]["signal"] == "SIGTERM");
}

// --- crash-loop policy (--restart-backoff, --fail-fast-on-startup)

TEST_CASE_METHOD(AgentFixture, "agent: fail-fast stops a first attempt that crashed at start-up, budget unspent") {
  config.max_restarts = 3;
  config.fail_fast_on_startup = true;
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitDoNotRequeue, ShutdownReason::kFailed);
  CHECK(rdzv.rounds_asked == 1);
  CHECK(workers.starts == 1);
  CHECK(EventsNamed("restart").empty());
  const std::vector<Json> startup = EventsNamed("startup_failed");
  REQUIRE(startup.size() == 1);
  CHECK(startup[0]["cause"] == "worker_failed");
  CHECK(startup[0]["remaining_restarts"] == 3);
}

TEST_CASE_METHOD(AgentFixture, "agent: fail-fast's code wins over --exit-code-from-root-cause and an empty budget") {
  config.fail_fast_on_startup = true;
  config.exit_code_from_root_cause = true;
  StartRunning();
  workers.Exit(1, 7);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitDoNotRequeue, ShutdownReason::kFailed);
}

TEST_CASE_METHOD(AgentFixture, "agent: without fail-fast the same start-up crash is restarted") {
  config.max_restarts = 1;
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("startup_failed").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: fail-fast never stops a failure the membership caused") {
  config.max_restarts = 0;
  config.fail_fast_on_startup = true;
  StartRunning();
  workers.Exit(0, 1);  // the collective broke first
  rdzv.ChangeMembership(false, "node n2 left");
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("startup_failed").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: after a lost node, a start-up crash is no longer the first attempt's") {
  config.max_restarts = 2;
  config.fail_fast_on_startup = true;
  StartRunning();
  rdzv.ChangeMembership(true, "node n2 was lost");
  workers.FinishClose();
  Poll();
  rdzv.CompleteRound(2);
  Poll();
  REQUIRE(agent().state() == Agent::State::kRunning);
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("restart").size() == 2);
}

TEST_CASE_METHOD(AgentFixture, "agent: with a heartbeat on, a touch is progress and fail-fast restarts") {
  config.max_restarts = 1;
  config.fail_fast_on_startup = true;
  config.heartbeat_timeout = Seconds(3600);
  StartRunning();
  std::string file;
  for (const std::string& e : workers.last_specs[1].env) {
    if (e.rfind("CTRUN_HEARTBEAT_FILE=", 0) == 0) file = e.substr(e.find('=') + 1);
  }
  REQUIRE(!file.empty());
  std::ofstream(file) << "";
  // A touch after the start: the kernel's coarse file times could put a
  // touch made at once a hair before it.
  std::filesystem::last_write_time(file, std::filesystem::file_time_type::clock::now() + std::chrono::hours(1));
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("startup_failed").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: with a heartbeat on and no touch, fail-fast stops") {
  config.max_restarts = 1;
  config.fail_fast_on_startup = true;
  config.heartbeat_timeout = Seconds(3600);
  config.min_healthy_uptime = Seconds(0.000001);  // uptime is not what counts with a heartbeat
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitDoNotRequeue, ShutdownReason::kFailed);
}

TEST_CASE_METHOD(AgentFixture, "agent: --restart-backoff waits in kBackoff; a signal there exits at once") {
  config.max_restarts = 2;
  config.restart_backoff = Seconds(3600);
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kBackoff);
  CHECK(rdzv.rounds_asked == 1);
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["delay_s"] == 3600.0);
  rdzv.ChangeMembership(true, "node n2 was lost");  // ignored: no group runs
  CHECK(agent().state() == Agent::State::kBackoff);
  agent().HandleSignal(SIGTERM);
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(rdzv.rounds_asked == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: the backoff's timer begins the next rendezvous") {
  config.max_restarts = 1;
  config.restart_backoff = Seconds(0.001);
  StartRunning();
  workers.Exit(0, 1);
  workers.FinishClose();
  Poll();
  // The restart went through the backoff (its event says so); its 1 ms
  // timer may already have fired within Poll on a slow machine.
  const std::vector<Json> restarts = EventsNamed("restart");
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0]["delay_s"].get<double>() == Approx(0.001));
  CHECK(rdzv.rounds_asked == 1 + (agent().state() == Agent::State::kRendezvous ? 1 : 0));
  if (agent().state() == Agent::State::kBackoff) {
    // The timer is the only handler that can complete.
    CHECK(io.run_one_for(std::chrono::seconds(60)) == 1);
  }
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(rdzv.rounds_asked == 2);
}

TEST_CASE_METHOD(AgentFixture, "agent: a membership restart is not delayed by the backoff") {
  config.max_restarts = 1;
  config.restart_backoff = Seconds(3600);
  StartRunning();
  rdzv.ChangeMembership(true, "node n2 was lost");
  workers.FinishClose();
  Poll();
  CHECK(agent().state() == Agent::State::kRendezvous);
  CHECK(EventsNamed("restart")[0]["delay_s"] == 0.0);
}

// --- bounded kill (--kill-timeout)

TEST_CASE_METHOD(AgentFixture, "agent: a close that gives up on stuck processes ends the run with 4") {
  config.max_restarts = 3;
  config.kill_timeout = Seconds(7);
  StartRunning();
  workers.Exit(0, 1);
  CHECK(workers.last_kill_timeout == std::chrono::seconds(7));
  workers.GiveUpClose({StuckProcess{1, 1001, true, "python3", "D (uninterruptible sleep)"}});
  Poll();
  CheckFinished(Agent::State::kFailed, kExitWorkersStuck, ShutdownReason::kUnhealthy);
  CHECK(EventsNamed("restart").empty());
  const std::vector<Json> stuck = EventsNamed("workers_stuck");
  REQUIRE(stuck.size() == 1);
  REQUIRE(stuck[0]["processes"].size() == 1);
  CHECK(stuck[0]["processes"][0]["pid"] == 1001);
  CHECK(stuck[0]["processes"][0]["local_rank"] == 1);
  CHECK(stuck[0]["processes"][0]["state"] == "D (uninterruptible sleep)");
}

TEST_CASE_METHOD(AgentFixture, "agent: stuck processes win over the signal that stopped the group") {
  StartRunning();
  agent().HandleSignal(SIGTERM);
  workers.GiveUpClose({StuckProcess{0, 1000, true, "", "unknown"}});
  Poll();
  CheckFinished(Agent::State::kFailed, kExitWorkersStuck, ShutdownReason::kUnhealthy);
}


// ---- Node health (--health-check, CTRUN_EXCLUDE_NODE_FILE) ----------------

// Runs `io` until `done` holds; fails after a bound (the inotify event or a
// 1 ms timer are the only things awaited).
template <class F>
void RunUntil(boost::asio::io_context& io, F done) {
  for (int i = 0; i < 5000 && !done() && !io.stopped(); ++i) io.run_one_for(std::chrono::milliseconds(1));
  REQUIRE(done());
}

std::string EnvValue(const WorkerSpec& spec, const std::string& key) {
  for (const std::string& kv : spec.env) {
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "";
}

TEST_CASE_METHOD(AgentFixture, "agent: the health check runs before every join; a pass joins") {
  FakeHealth check;
  health = &check;
  Start();
  CHECK(check.runs == 1);
  CHECK(rdzv.rounds_asked == 0);  // no join before the check passed
  check.Answer(true);
  Poll();
  CHECK(rdzv.rounds_asked == 1);
  rdzv.CompleteRound(2);
  Poll();
  REQUIRE(agent().state() == Agent::State::kRunning);
  rdzv.ChangeMembership(/*charged=*/false, "node joined");
  workers.FinishClose();
  Poll();
  CHECK(check.runs == 2);  // again before the next round's join
  CHECK(rdzv.rounds_asked == 1);
  check.Answer(true);
  Poll();
  CHECK(rdzv.rounds_asked == 2);
}

TEST_CASE_METHOD(AgentFixture, "agent: a failed health check before the join leaves as unhealthy with exit 4") {
  FakeHealth check;
  health = &check;
  Start();
  check.Answer(false, {"GPU 3: uncorrectable ECC error"});
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.rounds_asked == 0);
  CHECK(rdzv.unhealthy_report == "health check 'check.sh' exited with 1\n  GPU 3: uncorrectable ECC error");
  const std::vector<Json> ev = EventsNamed("node_unhealthy");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]["source"] == "health_check");
  CHECK(ev[0]["during"] == "rendezvous");
  CHECK(ev[0]["last_lines"] == Json::array({"GPU 3: uncorrectable ECC error"}));
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal during the pre-join check cancels it") {
  FakeHealth check;
  health = &check;
  Start();
  agent().HandleSignal(SIGTERM);
  Poll();
  CheckFinished(Agent::State::kFailed, kExitSignalBase + SIGTERM, ShutdownReason::kSignal);
  CHECK(check.cancels == 1);
}

TEST_CASE_METHOD(AgentFixture, "agent: with an interval the check runs while the workers run; a failure stops them and leaves") {
  FakeHealth check;
  health = &check;
  config.health_check_interval = Seconds(0.001);
  Start();
  check.Answer(true);
  Poll();
  rdzv.CompleteRound(2);
  Poll();
  REQUIRE(agent().state() == Agent::State::kRunning);
  RunUntil(io, [&] { return check.pending(); });
  check.Answer(true);  // healthy: armed again
  RunUntil(io, [&] { return check.pending(); });
  CHECK(check.runs == 3);
  check.Answer(false, {"disk full"});
  Poll();
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "health check 'check.sh' exited with 1\n  disk full");
  const std::vector<Json> ev = EventsNamed("node_unhealthy");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]["during"] == "running");
  CHECK(EventsNamed("restart").empty());  // the node leaves; it does not restart
}

TEST_CASE_METHOD(AgentFixture, "agent: a worker's exclusion request stops the group and leaves as unhealthy") {
  StartRunning();
  const std::string file = agent().ExcludeNodeFile();
  CHECK(EnvValue(workers.last_specs.at(0), "CTRUN_EXCLUDE_NODE_FILE") == file);
  std::ofstream(file) << "NIC eth1 flapping\n";
  RunUntil(io, [&] { return agent().state() == Agent::State::kStopping; });
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report ==
        "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): NIC eth1 flapping");
  const std::vector<Json> ev = EventsNamed("node_unhealthy");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]["source"] == "exclusion_request");
}

TEST_CASE_METHOD(AgentFixture, "agent: a worker that writes its request and exits 1 excludes the node, not a restart") {
  config.max_restarts = 3;
  StartRunning();
  std::ofstream(agent().ExcludeNodeFile()) << "GPU lost\n";
  workers.Exit(0, 1);  // seen before the inotify event: the exit checks the file
  CHECK(agent().state() == Agent::State::kStopping);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(EventsNamed("restart").empty());
}

// A signal while the node leaves as unhealthy: the node still leaves with
// its report and exit 4 (docs/exit-codes.md: 4 wins over 128+N).
TEST_CASE_METHOD(AgentFixture, "agent: a signal while leaving unhealthy keeps exit 4 and the report") {
  config.max_restarts = 3;
  StartRunning();
  std::ofstream(agent().ExcludeNodeFile()) << "GPU lost\n";
  workers.Exit(0, 1);  // the exit checks the file: the stop is the node's exclusion
  REQUIRE(agent().state() == Agent::State::kStopping);
  agent().HandleSignal(SIGTERM);
  // The workers keep their SIGTERM's grace: no new Close.
  CHECK(agent().state() == Agent::State::kStopping);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): GPU lost");
  CHECK(EventsNamed("node_unhealthy").size() == 1);
  CHECK(EventsNamed("signal").size() == 1);
  CHECK(EventsNamed("restart").empty());
}

TEST_CASE_METHOD(AgentFixture, "agent: a failed periodic check then two signals: SIGKILL now, still exit 4") {
  FakeHealth check;
  health = &check;
  config.health_check_interval = Seconds(0.001);
  Start();
  check.Answer(true);
  Poll();
  rdzv.CompleteRound(2);
  Poll();
  RunUntil(io, [&] { return check.pending(); });
  check.Answer(false, {"disk full"});
  Poll();
  REQUIRE(agent().state() == Agent::State::kStopping);
  agent().HandleSignal(SIGINT);
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  agent().HandleSignal(SIGINT);  // the second: the group is closed again at once
  CHECK(workers.close_signals == std::vector<int>{SIGTERM, SIGINT});
  CHECK(agent().state() == Agent::State::kStopping);
  workers.FinishClose();
  Poll();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "health check 'check.sh' exited with 1\n  disk full");
}

TEST_CASE_METHOD(AgentFixture, "agent: a signal during the unhealthy leave changes nothing") {
  StartRunning();
  std::ofstream(agent().ExcludeNodeFile()) << "NIC down\n";
  workers.Exit(1, 1);
  REQUIRE(agent().state() == Agent::State::kStopping);
  rdzv.hold_shutdown = true;
  workers.FinishClose();  // the leave has begun, and is held
  Poll();
  CHECK(agent().state() == Agent::State::kFailed);
  CHECK(agent().exit_code() == kExitNodeUnhealthy);
  REQUIRE(rdzv.leaving());
  agent().HandleSignal(SIGTERM);
  agent().HandleSignal(SIGTERM);
  Poll();
  CHECK(workers.close_signals == std::vector<int>{SIGTERM});
  CHECK(agent().exit_code() == kExitNodeUnhealthy);
  rdzv.FinishLeave();
  CheckFinished(Agent::State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
  CHECK(rdzv.unhealthy_report == "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): NIC down");
}

TEST_CASE_METHOD(AgentFixture, "agent: a stale exclusion request does not survive into a new group") {
  Start();
  std::filesystem::create_directories(std::filesystem::path(agent().ExcludeNodeFile()).parent_path());
  std::ofstream(agent().ExcludeNodeFile()) << "old\n";
  rdzv.CompleteRound(2);
  Poll();
  CHECK(agent().state() == Agent::State::kRunning);
  CHECK_FALSE(std::filesystem::exists(agent().ExcludeNodeFile()));
}

TEST_CASE_METHOD(AgentFixture, "agent: a run closed for the unhealthy budget exits 5") {
  Start();
  rdzv.Answer(Status::ResourceExhausted("2 nodes left the job as unhealthy"));
  Poll();
  CheckFinished(Agent::State::kFailed, kExitUnhealthyBudget, ShutdownReason::kFailed);
  CHECK(EventsNamed("unhealthy_budget_exceeded").size() == 1);
}

}  // namespace
}  // namespace ctrun::launcher
