// WorkerSet's close with its reaper faked: real worker processes, killed for
// real, but reaped only when the test says so. A child nobody reaps stays a
// zombie that SIGKILL cannot end: the stand-in for a worker in uninterruptible
// sleep, which cannot be made safely here. Waits are bounded by a deadline,
// never a sleep; no test reads a duration.
#include "launcher/process/workers.h"

#include <signal.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <optional>

namespace ctrun::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Records registrations; reaps only on Reap().
class FakeReaper : public ChildReaper {
 public:
  ~FakeReaper() override {
    for (auto& [pid, cb] : waiting_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  void Register(pid_t pid, ExitCallback cb) override { waiting_[pid] = std::move(cb); }
  void OnAnyExit(std::function<void()> cb) override { on_any_ = std::move(cb); }

  // Waits for `pid` to end, reaps it and tells the WorkerSet.
  void Reap(pid_t pid) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    auto cb = std::move(waiting_.at(pid));
    waiting_.erase(pid);
    cb(pid, status, 0);
    if (on_any_) on_any_();
  }

 private:
  std::map<pid_t, ExitCallback> waiting_;
  std::function<void()> on_any_;
};

struct Fixture {
  boost::asio::io_context io;
  FakeReaper reaper;
  WorkerSet workers{io, reaper, nullptr};
  std::vector<WorkerExit> exits;

  pid_t StartSleeper() {
    WorkerSpec spec;
    spec.argv = {"/bin/sleep", "600"};
    std::vector<std::pair<int, int>> pipes;
    REQUIRE(workers.Start({spec}, [this](const WorkerExit& e) { exits.push_back(e); }, &pipes).ok());
    REQUIRE(workers.Pids().size() == 1);
    return workers.Pids()[0];
  }

  // Runs the loop until `done` ran, a minute at most.
  void RunUntil(const std::optional<std::vector<StuckProcess>>& result) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    while (!result && std::chrono::steady_clock::now() < deadline) io.run_one_for(milliseconds(100));
    REQUIRE(result);
  }
};

TEST_CASE_METHOD(Fixture, "workers: a worker killed but never reaped is reported stuck after the kill timeout") {
  const pid_t pid = StartSleeper();
  // Dead before the close, and left unreaped (WNOWAIT): a zombie for sure.
  ::kill(pid, SIGKILL);
  siginfo_t info;
  REQUIRE(::waitid(P_PID, pid, &info, WEXITED | WNOWAIT) == 0);
  std::optional<std::vector<StuckProcess>> result;
  workers.Close(SIGTERM, milliseconds(1), milliseconds(50),
                [&](const std::vector<StuckProcess>& stuck) { result = stuck; });
  RunUntil(result);
  REQUIRE(result->size() == 1);
  const StuckProcess& p = result->front();
  CHECK(p.pid == pid);
  CHECK(p.local_rank == 0);
  CHECK(p.is_worker);
  CHECK(p.comm == "sleep");
  CHECK(p.state == "Z (zombie)");
  // It was given up on: its late reap is not reported.
  reaper.Reap(pid);
  io.poll();
  CHECK(exits.empty());
}

TEST_CASE_METHOD(Fixture, "workers: a worker reaped before the kill timeout closes cleanly") {
  const pid_t pid = StartSleeper();
  std::optional<std::vector<StuckProcess>> result;
  workers.Close(SIGTERM, seconds(3600), seconds(3600),
                [&](const std::vector<StuckProcess>& stuck) { result = stuck; });
  reaper.Reap(pid);  // SIGTERM ends sleep
  RunUntil(result);
  CHECK(result->empty());
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].exit_code == -SIGTERM);
}

TEST_CASE_METHOD(Fixture, "workers: a second close sends SIGKILL at once and starts the kill timeout") {
  const pid_t pid = StartSleeper();
  ::kill(pid, SIGSTOP);  // ignores SIGTERM until continued; SIGKILL still ends it
  std::optional<std::vector<StuckProcess>> first, second;
  workers.Close(SIGTERM, seconds(3600), milliseconds(50),
                [&](const std::vector<StuckProcess>& stuck) { first = stuck; });
  workers.Close(SIGINT, seconds(3600), milliseconds(50),
                [&](const std::vector<StuckProcess>& stuck) { second = stuck; });
  RunUntil(second);
  CHECK_FALSE(first);
  REQUIRE(second->size() == 1);
  CHECK(second->front().pid == pid);
}

}  // namespace
}  // namespace ctrun::launcher
