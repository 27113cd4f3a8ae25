// StepTimes (pure) and StepWatcher (real files, real inotify).
#include "launcher/liveness/step_times.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "launcher/liveness/step_watcher.h"

namespace ctrun::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const WallTime kStepTimesStart = WallTime() + std::chrono::hours(1000);

TEST_CASE("step times: the first touch starts the count, each next one is a step") {
  StepTimes t(2, kStepTimesStart);
  t.Touch(0, kStepTimesStart + seconds(5));
  CHECK(t.Take().empty());
  t.Touch(0, kStepTimesStart + seconds(6));
  t.Touch(0, kStepTimesStart + seconds(8));
  t.Touch(0, kStepTimesStart + seconds(9));
  // Intervals 1, 2, 1: median 1; three steps.
  CHECK(t.Take() == std::vector<StepSample>{{0, seconds(1), 3}});
  CHECK(t.Take().empty());  // nothing new
  t.Touch(0, kStepTimesStart + seconds(11));
  t.Touch(0, kStepTimesStart + seconds(15));
  // Even count: the mean of the middle two (2 and 4).
  CHECK(t.Take() == std::vector<StepSample>{{0, seconds(3), 5}});
}

TEST_CASE("step times: leftovers, repeats and unknown ranks are ignored") {
  StepTimes t(2, kStepTimesStart);
  t.Touch(1, kStepTimesStart - seconds(1));  // before the start
  t.Touch(1, kStepTimesStart + seconds(1));
  t.Touch(1, kStepTimesStart + seconds(1));  // the same touch seen twice
  t.Touch(1, kStepTimesStart);               // older than the last
  t.Touch(1, kStepTimesStart + milliseconds(1500));
  t.Touch(2, kStepTimesStart + seconds(3));
  t.Touch(-1, kStepTimesStart + seconds(3));
  CHECK(t.Take() == std::vector<StepSample>{{1, milliseconds(500), 1}});
}

TEST_CASE("step times: only ranks with a new step are reported") {
  StepTimes t(3, kStepTimesStart);
  for (int r = 0; r < 3; ++r) t.Touch(r, kStepTimesStart + seconds(1));
  t.Touch(2, kStepTimesStart + seconds(3));
  CHECK(t.Take() == std::vector<StepSample>{{2, seconds(2), 1}});
}

// Sets `path`'s modification time to `when`: a touch at a time the test
// chooses, so nothing depends on how fast the test runs.
void TouchAt(const std::string& path, WallTime when) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ns / 1'000'000'000;
  times[0].tv_nsec = times[1].tv_nsec = ns % 1'000'000'000;
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

// Runs every handler that is ready: the kernel queued the inotify events of
// a touch before utimensat returned, so they are read now.
void Drain(boost::asio::io_context& io) {
  while (io.poll() > 0) {
  }
}

TEST_CASE("step watcher: sees every touch of each worker's file through inotify") {
  char tmpl[] = "/tmp/ctrun-steps-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  REQUIRE(::mkdir((dir + "/0").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir + "/1").c_str(), 0755) == 0);
  const std::vector<std::string> files = {dir + "/0/heartbeat", dir + "/1/heartbeat"};
  for (const std::string& f : files) std::ofstream(f).close();
  boost::asio::io_context io;
  StepWatcher watcher(io, files);
  const WallTime t0 = std::chrono::system_clock::now() + seconds(10);
  for (int ms : {0, 100, 200}) {
    TouchAt(files[0], t0 + milliseconds(ms));
    Drain(io);
  }
  for (int ms : {0, 300}) {
    TouchAt(files[1], t0 + milliseconds(ms));
    Drain(io);
  }
  std::ofstream(dir + "/0/other").close();  // not a heartbeat file
  Drain(io);
  CHECK(watcher.Take() == std::vector<StepSample>{{0, milliseconds(100), 2}, {1, milliseconds(300), 1}});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ctrun::launcher
