// CommandHealthCheck's end: what is left of its output is read without
// waiting and in a bounded amount. The check's "pipe" here is a 16 MiB file,
// a descriptor that never runs dry until its end, like the pipe of a
// descendant that left the check's process group and keeps writing: the
// check must decide after reading a bounded part of it, not all of it.
#include "launcher/health/command_check.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <string>

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

}  // namespace
}  // namespace ctrun::launcher
