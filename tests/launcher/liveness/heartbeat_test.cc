#include "launcher/liveness/heartbeat.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "launcher/cli/config.h"
#include "launcher/process/worker_env.h"

namespace ctrun::launcher {
namespace {

using std::chrono::seconds;

const TimePoint kStart = TimePoint() + std::chrono::hours(1);

HeartbeatDeadlines TwoWorkers() {
  return HeartbeatDeadlines({seconds(60), seconds(10)}, 2, kStart);
}

TEST_CASE("Before any touch the initial timeout applies") {
  HeartbeatDeadlines d = TwoWorkers();
  CHECK(d.NextDeadline() == kStart + seconds(60));
  CHECK_FALSE(d.Expired(kStart + seconds(59)));
  auto miss = d.Expired(kStart + seconds(60));
  REQUIRE(miss);
  CHECK(miss->local_rank == 0);
  CHECK(miss->silent_for == seconds(60));
  CHECK_FALSE(miss->ever_touched);
}

TEST_CASE("After the first touch the steady timeout runs from the touch") {
  HeartbeatDeadlines d = TwoWorkers();
  d.Observe(0, seconds(2), kStart + seconds(5));  // touched at start+3
  d.Observe(1, seconds(0), kStart + seconds(5));  // touched at start+5
  CHECK(d.NextDeadline() == kStart + seconds(13));
  CHECK_FALSE(d.Expired(kStart + seconds(12)));
  auto miss = d.Expired(kStart + seconds(13));
  REQUIRE(miss);
  CHECK(miss->local_rank == 0);
  CHECK(miss->silent_for == seconds(10));
  CHECK(miss->ever_touched);
}

TEST_CASE("A later touch moves the deadline, an older one does not") {
  HeartbeatDeadlines d = TwoWorkers();
  d.Observe(0, seconds(0), kStart + seconds(5));
  d.Observe(1, seconds(0), kStart + seconds(20));
  d.Observe(0, seconds(0), kStart + seconds(14));
  CHECK(d.NextDeadline() == kStart + seconds(24));
  d.Observe(0, seconds(10), kStart + seconds(16));  // touched at start+6: older
  CHECK(d.NextDeadline() == kStart + seconds(24));
  CHECK_FALSE(d.Expired(kStart + seconds(23)));
}

TEST_CASE("Until every rank has touched, the files are looked at every steady timeout") {
  HeartbeatDeadlines d = TwoWorkers();
  CHECK(d.NextCheck(kStart) == kStart + seconds(10));
  CHECK(d.NextCheck(kStart + seconds(55)) == kStart + seconds(60));
  d.Observe(0, seconds(0), kStart + seconds(3));
  CHECK(d.NextCheck(kStart + seconds(3)) == kStart + seconds(13));
  d.Observe(1, seconds(0), kStart + seconds(4));
  CHECK(d.NextCheck(kStart + seconds(4)) == kStart + seconds(13));  // both touched: deadlines only
  d.Forget(0);
  d.Forget(1);
  CHECK_FALSE(d.NextCheck(kStart + seconds(5)));
}

TEST_CASE("A file touched before the start does not count as a heartbeat") {
  HeartbeatDeadlines d = TwoWorkers();
  d.Observe(0, seconds(30), kStart + seconds(5));  // touched 25 s before the start
  CHECK(d.NextDeadline() == kStart + seconds(60));
  d.Observe(0, std::nullopt, kStart + seconds(6));  // no file
  CHECK(d.NextDeadline() == kStart + seconds(60));
}

TEST_CASE("A future mtime reads as a touch now") {
  HeartbeatDeadlines d = TwoWorkers();
  d.Observe(0, -seconds(5), kStart + seconds(1));
  d.Observe(1, seconds(0), kStart + seconds(1));
  CHECK(d.NextDeadline() == kStart + seconds(11));
}

TEST_CASE("Forgotten ranks are neither reported nor waited for") {
  HeartbeatDeadlines d = TwoWorkers();
  d.Observe(1, seconds(0), kStart + seconds(1));
  d.Forget(0);
  CHECK(d.NextDeadline() == kStart + seconds(11));
  auto miss = d.Expired(kStart + seconds(100));
  REQUIRE(miss);
  CHECK(miss->local_rank == 1);
  d.Forget(1);
  CHECK_FALSE(d.NextDeadline());
  CHECK_FALSE(d.Expired(kStart + seconds(1000)));
}

TEST_CASE("Out-of-range ranks are ignored") {
  HeartbeatDeadlines d = TwoWorkers();
  d.Observe(7, seconds(0), kStart + seconds(1));
  d.Observe(-1, seconds(0), kStart + seconds(1));
  d.Forget(9);
  CHECK(d.NextDeadline() == kStart + seconds(60));
}

std::string TempPath(const char* name) {
  return std::string(P_tmpdir) + "/ctrun_heartbeat_test_" + std::to_string(::getpid()) + "_" + name;
}

TEST_CASE("FileAge reads an mtime and nullopt for no file") {
  const std::string path = TempPath("age");
  std::remove(path.c_str());
  CHECK_FALSE(FileAge(path));
  std::ofstream(path) << "x";
  auto age = FileAge(path);
  REQUIRE(age);
  CHECK(*age >= Duration::zero());
  std::remove(path.c_str());
}

TEST_CASE("The watcher reports a worker that never touches its file") {
  boost::asio::io_context io;
  const std::string missing = TempPath("never");
  std::remove(missing.c_str());
  std::optional<HeartbeatMiss> got;
  HeartbeatWatcher watcher(io, {std::chrono::milliseconds(1), seconds(3600)}, {missing},
                           [&](const HeartbeatMiss& m) { got = m; });
  io.run();  // returns once the timer fired and was not re-armed
  REQUIRE(got);
  CHECK(got->local_rank == 0);
  CHECK_FALSE(got->ever_touched);
}

TEST_CASE("The watcher does not report once every rank is forgotten") {
  boost::asio::io_context io;
  bool called = false;
  HeartbeatWatcher watcher(io, {std::chrono::milliseconds(1), seconds(3600)}, {TempPath("gone")},
                           [&](const HeartbeatMiss&) { called = true; });
  watcher.Forget(0);
  io.run();
  CHECK_FALSE(called);
}

TEST_CASE("CTRUN_HEARTBEAT_FILE is set only when the agent names a file") {
  const WorkerRanks ranks = AssignRanks(0, {1})[0];
  CHECK(BuildWorkerEnv({}, ranks, RoundEnv{}, "e").count("CTRUN_HEARTBEAT_FILE") == 0);
  CHECK(BuildWorkerEnv({}, ranks, RoundEnv{}, "e", "/logs/attempt_0/0/heartbeat").at("CTRUN_HEARTBEAT_FILE") ==
        "/logs/attempt_0/0/heartbeat");
}

TEST_CASE("flag --heartbeat-timeout is off by default and takes seconds or PET_HEARTBEAT_TIMEOUT") {
  auto off = ParseCommandLine({"t.py"}, {});
  REQUIRE(off.ok());
  CHECK(off->config.heartbeat_timeout == Seconds(0));
  CHECK_FALSE(off->config.heartbeat_initial_timeout);
  auto on = ParseCommandLine({"--heartbeat-timeout", "2.5", "--heartbeat_initial_timeout=30", "t.py"}, {});
  REQUIRE(on.ok());
  CHECK(on->config.heartbeat_timeout == Seconds(2.5));
  CHECK(on->config.heartbeat_initial_timeout == Seconds(30));
  auto env = ParseCommandLine({"t.py"}, {{"PET_HEARTBEAT_TIMEOUT", "7"}, {"PET_HEARTBEAT_INITIAL_TIMEOUT", "9"}});
  REQUIRE(env.ok());
  CHECK(env->config.heartbeat_timeout == Seconds(7));
  CHECK(env->config.heartbeat_initial_timeout == Seconds(9));
}

TEST_CASE("Bad heartbeat timeouts are one-line errors naming the flag and the fix") {
  auto neg = ParseCommandLine({"--heartbeat-timeout", "-1", "t.py"}, {});
  REQUIRE_FALSE(neg.ok());
  CHECK_THAT(neg.status().message(), Catch::Contains("--heartbeat-timeout '-1'") &&
                                          Catch::Contains("seconds >= 0, 0 = off"));
  auto zero = ParseCommandLine({"--heartbeat-initial-timeout", "0", "t.py"}, {});
  REQUIRE_FALSE(zero.ok());
  CHECK_THAT(zero.status().message(), Catch::Contains("--heartbeat-initial-timeout '0'"));
}

}  // namespace
}  // namespace ctrun::launcher
