// The agent under test with a scripted worker group, health checker,
// rendezvous and liveness watchers (tests/launcher/agent/agent_test.cc,
// agent_health_test.cc, agent_watchers_test.cc): events
// in, actions out; the agent's io_context is only polled. Test code: each
// test file includes it once.
#pragma once

#include "launcher/agent/agent.h"

#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>


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

  void Close(int sig, Duration grace, Duration kill_timeout, CloseHandler done) override {
    close_signals.push_back(sig);
    last_grace = grace;
    last_kill_timeout = kill_timeout;
    close_done_ = std::move(done);
  }

  std::vector<pid_t> Pids() const override { return pids_; }

  void SaveStacks(int local_rank, const std::string& why) override {
    stacks_saved.push_back({local_rank, why});
  }

  // Worker `local_rank` exits with `code` (< 0: killed by signal -code).
  void Exit(int local_rank, int code) {
    REQUIRE(running_.erase(local_rank) == 1);
    on_exit_(WorkerExit{local_rank, pids_[local_rank], code, 0, 0});
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
  Duration last_grace{};
  Status start_status;
  std::vector<std::pair<int, std::string>> stacks_saved;  // SaveStacks: local rank, why

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
    HealthResult r;
    r.healthy = healthy;
    if (!healthy) r.failure = "exited with 1";
    r.last_lines = std::move(lines);
    AnswerWith(r);
  }
  void AnswerWith(const HealthResult& r) {
    REQUIRE(done_);
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
  void TrackSteps(StepSource source, StragglerCallback on_change) override {
    step_source_ = std::move(source);
    straggler_ = std::move(on_change);
  }
  // A keep-alive asks the agent for its step report.
  std::optional<rdzv::StepReport> AskStepReport() {
    REQUIRE(step_source_);
    return step_source_();
  }
  void SendPreemptNotice(const PreemptNotice& notice) override { sent_notices.push_back(notice); }
  void ReportFailures(const FailureReport& report) override { reports.push_back(report); }
  void SetFailureVerdict(const rdzv::VerdictSummary& verdict) override { left_verdict = verdict; }
  void OnRunFailed(RunFailedCallback cb) override { run_failed_ = std::move(cb); }
  // Another node failed for good and closed the run.
  void FailRun(const std::optional<rdzv::VerdictSummary>& verdict) {
    REQUIRE(run_failed_);
    run_failed_(verdict);
  }
  void OnPreemptNotice(PreemptCallback cb) override { preempt_ = std::move(cb); }
  // Another node's notice arrives.
  void PushPreempt(const PreemptNotice& notice) {
    REQUIRE(preempt_);
    preempt_(notice);
  }
  // The rendezvous flags (slow) or clears one of this node's ranks.
  void SendStraggler(const rdzv::StragglerChange& change) {
    REQUIRE(straggler_);
    straggler_(change);
  }

  int rounds_asked = 0;
  std::optional<ShutdownReason> shutdown;
  std::string unhealthy_report;
  bool hold_shutdown = false;
  std::vector<PreemptNotice> sent_notices;  // SendPreemptNotice, in order
  std::vector<FailureReport> reports;       // ReportFailures, in order
  std::optional<rdzv::VerdictSummary> left_verdict;  // SetFailureVerdict's, for the Leave

 private:
  RunFailedCallback run_failed_;
  PreemptCallback preempt_;
  std::function<void(Result<Round>)> next_;
  std::function<void()> leave_;
  ChangeCallback change_;
  StepSource step_source_;
  StragglerCallback straggler_;
};

// The liveness watchers as the agent sees them: each group's watches are
// recorded; a heartbeat miss and step times come when the test says so.
class FakeLiveness : public LivenessWatchers {
 public:
  class Heartbeat : public HeartbeatWatch {
   public:
    Heartbeat(FakeLiveness& owner, MissHandler on_miss) : owner_(owner), on_miss_(std::move(on_miss)) {
      owner_.heartbeat_ = this;
    }
    ~Heartbeat() override { owner_.heartbeat_ = nullptr; }
    void Forget(int local_rank) override { owner_.forgotten.push_back(local_rank); }
    bool AnyTouched() const override { return owner_.touched; }
    void Miss(const HeartbeatMiss& miss) { on_miss_(miss); }

   private:
    FakeLiveness& owner_;
    MissHandler on_miss_;
  };
  class Steps : public StepWatch {
   public:
    explicit Steps(FakeLiveness& owner) : owner_(owner) { owner_.steps_ = this; }
    ~Steps() override { owner_.steps_ = nullptr; }
    std::vector<StepSample> Take() override { return std::exchange(owner_.samples, {}); }

   private:
    FakeLiveness& owner_;
  };

  std::unique_ptr<HeartbeatWatch> WatchHeartbeats(boost::asio::io_context&, HeartbeatTimeouts t,
                                                  std::vector<std::string> files,
                                                  HeartbeatWatch::MissHandler on_miss) override {
    timeouts = t;
    heartbeat_files = std::move(files);
    ++heartbeat_watches;
    return std::make_unique<Heartbeat>(*this, std::move(on_miss));
  }
  std::unique_ptr<StepWatch> WatchSteps(boost::asio::io_context&, std::vector<std::string> files) override {
    step_files = std::move(files);
    return std::make_unique<Steps>(*this);
  }

  // The live heartbeat watch misses `local_rank`'s heartbeat.
  void Miss(int local_rank, Duration silent_for, bool ever_touched) {
    REQUIRE(heartbeat_);
    heartbeat_->Miss(HeartbeatMiss{local_rank, silent_for, ever_touched});
  }
  bool heartbeat_watched() const { return heartbeat_ != nullptr; }
  bool steps_watched() const { return steps_ != nullptr; }

  int heartbeat_watches = 0;
  HeartbeatTimeouts timeouts;
  std::vector<std::string> heartbeat_files, step_files;
  std::vector<int> forgotten;
  bool touched = false;             // AnyTouched's answer
  std::vector<StepSample> samples;  // the next Take's answer

 private:
  Heartbeat* heartbeat_ = nullptr;
  Steps* steps_ = nullptr;
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
    if (liveness) agent_->SetLivenessWatchers(liveness);
    agent_->SetLaunchWindow(launch_window);
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

  // Runs `io` until `done` holds; fails after a bound (the inotify event or a
  // 1 ms timer are the only things awaited).
  template <class F>
  void RunUntil(F done) {
    for (int i = 0; i < 5000 && !done() && !io.stopped(); ++i) io.run_one_for(std::chrono::milliseconds(1));
    REQUIRE(done());
  }

  // `check` as --health-check with a 1 ms --health-check-interval: passes its
  // pre-join run, the round completes, and the first periodic run is pending.
  void StartRunningWithPeriodicCheck(FakeHealth& check) {
    health = &check;
    config.health_check_interval = Seconds(0.001);
    Start();
    check.Answer(true);
    Poll();
    rdzv.CompleteRound(2);
    Poll();
    REQUIRE(agent().state() == Agent::State::kRunning);
    RunUntil([&] { return check.pending(); });
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
  LivenessWatchers* liveness = nullptr; // null: the real watchers; set before Start
  FakeLiveness fake_liveness;           // outlives the agent: `liveness = &fake_liveness`
  Duration launch_window{};             // Agent::SetLaunchWindow; none unless a test sets one

 private:
  std::string dir_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<Agent> agent_;
};

}  // namespace agent_testing
}  // namespace ctrun::launcher
