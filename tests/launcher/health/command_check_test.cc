// CommandHealthCheck's end: what is left of its output is read without
// waiting and in a bounded amount. The check's "pipe" here is a 16 MiB file,
// a descriptor that never runs dry until its end, like the pipe of a
// descendant that left the check's process group and keeps writing: the
// check must decide after reading a bounded part of it, not all of it.
//
// Then real checks, under /bin/sh with a real WorkerSet and Reaper: one that
// fails (its exit code and last lines in the result), one that outlives its
// timeout (killed and reaped, the result says timed out), and one that floods
// its pipes (it finishes; the result keeps a bounded tail). Every wait is on
// the io_context, bounded by a deadline; no test reads a duration.
#include "launcher/health/command_check.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <string>

#include "launcher/process/workers.h"

namespace ctrun::launcher {
namespace {

// Starts nothing: its one "process" has `out` as its stdout pipe, and exits
// when the test says so. Close completes at once (posted, as WorkerSet's).
class FakeRunner : public WorkerGroup {
 public:
  FakeRunner(boost::asio::io_context& io, int out) : io_(io), out_(out) {}

  Status Start(const std::vector<WorkerSpec>&, ExitHandler on_exit,
               std::vector<std::pair<int, int>>* pipes) override {
    on_exit_ = std::move(on_exit);
    pipes->assign(1, {out_, -1});  // the check owns and closes it now
    return Status::Ok();
  }
  void Close(int, Duration, Duration, CloseHandler done) override {
    boost::asio::post(io_, [done] { done({}); });
  }
  std::vector<pid_t> Pids() const override { return {4242}; }

  void Exit(int code) { on_exit_(WorkerExit{0, 4242, code, 0}); }

 private:
  boost::asio::io_context& io_;
  int out_;
  ExitHandler on_exit_;
};

TEST_CASE("health check: output left at its end is read in a bounded amount, then closed") {
  char path[] = "/tmp/ctrun_check_out_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::unlink(path);
  constexpr size_t kFile = 16 << 20;
  std::string lines;
  for (size_t i = 0; i < kFile / 2; ++i) lines += "y\n";
  REQUIRE(::pwrite(fd, lines.data(), lines.size(), 0) == static_cast<ssize_t>(lines.size()));
  REQUIRE(::lseek(fd, 0, SEEK_SET) == 0);
  // A second descriptor on the same open file: it shares the read offset,
  // and stays open when the check closes its own.
  const int probe = ::dup(fd);
  REQUIRE(probe >= 0);

  boost::asio::io_context io;
  FakeRunner runner(io, fd);
  CommandHealthCheck check(io, runner, "writer-that-never-stops", std::chrono::seconds(3600), {});
  std::optional<HealthResult> result;
  check.Run([&](const HealthResult& r) { result = r; });
  runner.Exit(0);
  for (int i = 0; i < 100000 && !result; ++i) io.run_one_for(std::chrono::milliseconds(10));
  REQUIRE(result);
  CHECK(result->healthy);
  CHECK(result->last_lines.size() == 20);
  // Read: a few of the running check's 4 KiB reads, then at most the cap
  // (1 MiB); never the whole 16 MiB.
  const off_t read_bytes = ::lseek(probe, 0, SEEK_CUR);
  INFO("read " << read_bytes << " bytes");
  CHECK(read_bytes > 0);
  CHECK(read_bytes <= (2 << 20));
  ::close(probe);
}


// A real check: /bin/sh under a WorkerSet whose children a real Reaper reaps
// (this test process becomes a child subreaper, as ctrun is).
struct RealCheck {
  boost::asio::io_context io;
  Reaper reaper{io};
  WorkerSet workers{io, reaper, nullptr};
  pid_t pid = 0;  // the check's shell, once started

  // Runs `command` once; the result, or a failed REQUIRE after a minute.
  HealthResult Run(const std::string& command, Duration timeout) {
    CommandHealthCheck check(io, workers, command, timeout, {"PATH=/usr/bin:/bin"});
    std::optional<HealthResult> result;
    check.Run([&](const HealthResult& r) { result = r; });
    REQUIRE(workers.Pids().size() == 1);
    pid = workers.Pids()[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!result && std::chrono::steady_clock::now() < deadline) io.run_one_for(std::chrono::milliseconds(100));
    REQUIRE(result);
    return *result;
  }
};

bool Has(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

TEST_CASE("health check: a check that exits non-zero fails with its exit code and its last lines") {
  RealCheck c;
  const HealthResult r = c.Run("echo one; echo two >&2; echo three; exit 3", std::chrono::seconds(3600));
  CHECK_FALSE(r.healthy);
  CHECK(r.failure == "exited with 3");
  // stdout and stderr are two pipes: their lines' order between them is not fixed.
  CHECK(r.last_lines.size() == 3);
  CHECK(Has(r.last_lines, "one"));
  CHECK(Has(r.last_lines, "two"));
  CHECK(Has(r.last_lines, "three"));
  CHECK_THAT(FormatHealthReport("check.sh", r), Catch::StartsWith("health check 'check.sh' exited with 3"));
}

TEST_CASE("health check: a check still running at its timeout is killed, reaped, and timed out") {
  RealCheck c;
  const HealthResult r = c.Run("echo started; exec sleep 600", std::chrono::milliseconds(50));
  CHECK_FALSE(r.healthy);
  CHECK_THAT(r.failure, Catch::StartsWith("timed out after 0.05 s"));
  // The result came once the check's process group was gone: its shell
  // (then sleep) was killed and reaped, not left behind.
  CHECK(::kill(c.pid, 0) == -1);
  CHECK(errno == ESRCH);
  CHECK(::waitpid(c.pid, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("health check: a check that floods its pipe still finishes, with a bounded tail") {
  RealCheck c;
  // 400 KB of lines and one 1 MiB line, far past a pipe's 64 KiB: the check
  // must read while it runs. Then a last short line.
  const HealthResult r = c.Run("yes | head -n 200000; head -c 1048576 /dev/zero | tr '\\000' z; echo; echo end",
                               std::chrono::seconds(3600));
  CHECK(r.healthy);
  CHECK(r.failure.empty());
  REQUIRE(r.last_lines.size() == 20);
  CHECK(r.last_lines.back() == "end");
  CHECK(r.last_lines[18] == std::string(400, 'z') + "...");
  for (size_t i = 0; i < 18; ++i) CHECK(r.last_lines[i] == "y");
}

}  // namespace
}  // namespace ctrun::launcher
