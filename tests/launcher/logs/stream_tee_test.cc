#include "launcher/logs/stream_tee.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "tests/launcher/logs/test_pipe.h"

namespace ctrun::launcher {
namespace {

TEST_CASE("Whole lines get the prefix, a partial line waits for its end") {
  LinePrefixer p("[default0]:");
  std::string out;
  p.Feed("hello\nwor", &out);
  CHECK(out == "[default0]:hello\n");
  out.clear();
  p.Feed("ld\n", &out);
  CHECK(out == "[default0]:world\n");
}

TEST_CASE("Several lines in one chunk are each prefixed") {
  LinePrefixer p("[r1]:");
  std::string out;
  p.Feed("a\nb\n\nc\n", &out);
  CHECK(out == "[r1]:a\n[r1]:b\n[r1]:\n[r1]:c\n");
}

TEST_CASE("A last line without newline is completed at the end") {
  LinePrefixer p("[x]:");
  std::string out;
  p.Feed("no newline", &out);
  CHECK(out.empty());
  p.Finish(&out);
  CHECK(out == "[x]:no newline\n");
  out.clear();
  p.Finish(&out);
  CHECK(out.empty());
}

TEST_CASE("The prefix template expands role, rank and local rank") {
  CHECK(ExpandLinePrefix("", "default", 5, 1) == "[default1]:");
  CHECK(ExpandLinePrefix("[${role_name}/${rank}/${local_rank}] ", "trainer", 5, 1) ==
        "[trainer/5/1] ");
  CHECK(ExpandLinePrefix("${rank}${rank}|", "r", 3, 0) == "33|");
}

// A temporary file for a tee's console; removed at the end.
struct ConsoleFile {
  std::string path = "/tmp/ctrun_tee_console_XXXXXX";
  int fd = -1;
  ConsoleFile() {
    fd = ::mkstemp(path.data());
    REQUIRE(fd >= 0);
  }
  ~ConsoleFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
  std::string Text() const {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

// A tee from a worker's pipe to a console file, as the agent makes one.
struct TeeRig {
  boost::asio::io_context io;
  testing::TestPipe worker;
  ConsoleFile console;
  int ended = 0;  // on_eof's runs
  std::unique_ptr<StreamTee> tee;
  void Start() {
    tee = std::make_unique<StreamTee>(io, worker.TakeRead(), -1, console.fd, "[default0]:", [this] { ++ended; });
  }
};


std::string Lines(const std::string& prefix, int from, int to) {
  std::string s;
  for (int i = from; i < to; ++i) s += prefix + "line " + std::to_string(i) + "\n";
  return s;
}

TEST_CASE("A worker writing line by line is teed whole and in order across the tee's pauses") {
  boost::asio::io_context io;
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);  // the writer thread closes its end
  ConsoleFile console;
  bool ended = false;
  StreamTee tee(io, fds[0], -1, console.fd, "[default0]:", [&] { ended = true; });
  // One write per line, as an unbuffered Python worker makes them, from
  // another thread while the tee reads (pausing after each read that
  // emptied the pipe); more than the pipe holds, so the writer also waits.
  constexpr int kLines = 20000;
  int short_writes = 0;  // Catch's macros are for the test's own thread
  std::thread writer([w = fds[1], &short_writes] {
    for (int i = 0; i < kLines; ++i) {
      const std::string line = "line " + std::to_string(i) + "\n";
      if (::write(w, line.data(), line.size()) != static_cast<ssize_t>(line.size())) ++short_writes;
    }
    ::close(w);
  });
  while (!ended) REQUIRE(io.run_one() == 1);
  writer.join();
  CHECK(short_writes == 0);
  CHECK(tee.done());
  CHECK(console.Text() == Lines("[default0]:", 0, kLines));
}

TEST_CASE("A worker's end taken while the tee pauses keeps every line") {
  TeeRig rig;
  rig.worker.Write(Lines("", 0, 3));
  rig.Start();
  // The first read takes the three lines; the tee then pauses, the pipe set aside.
  while (rig.console.Text().empty()) REQUIRE(rig.io.run_one() == 1);
  REQUIRE(rig.console.Text() == Lines("[default0]:", 0, 3));
  // Written during the pause, with the writer still open (a descendant may
  // hold the pipe for ever): DrainAndFinish takes it and ends the stream.
  rig.worker.Write(Lines("", 3, 5) + "no newline");
  rig.tee->DrainAndFinish();
  CHECK(rig.tee->done());
  CHECK(rig.ended == 1);
  CHECK(rig.console.Text() == Lines("[default0]:", 0, 5) + "[default0]:no newline\n");
  rig.io.run();  // the cancelled pause ends without reading again
  CHECK(rig.ended == 1);
  // The read end is closed: a write now fails.
  ::signal(SIGPIPE, SIG_IGN);
  CHECK(::write(rig.worker.w, "x", 1) == -1);
}

TEST_CASE("A worker's end taken while a read is in flight keeps that read's bytes first") {
  TeeRig rig;
  rig.worker.Write(Lines("", 0, 2));
  // The tee starts its first read at once: it may take the two lines before
  // its handler has run. More comes, then the worker is gone.
  rig.Start();
  rig.worker.Write(Lines("", 2, 4));
  rig.tee->DrainAndFinish();
  while (rig.ended == 0) REQUIRE(rig.io.run_one() == 1);
  rig.io.run();
  CHECK(rig.ended == 1);
  CHECK(rig.console.Text() == Lines("[default0]:", 0, 4));
}

TEST_CASE("The tee's pause lets a writer at its last rate fill half the pipe, within bounds") {
  using us = std::chrono::microseconds;
  const size_t pipe = 256 << 10;
  // A quiet stream, or one line after a long spell: the longest pause.
  CHECK(TeeReadPause(us(0), 0, pipe) == kTeeReadPause);
  CHECK(TeeReadPause(us(2'000'000), 60, pipe) == kTeeReadPause);
  // 128 KiB in 10 ms: half the pipe takes 10 ms at that rate, over the bound.
  CHECK(TeeReadPause(us(10'000), 128 << 10, pipe) == kTeeReadPause);
  // 256 KiB in 4 ms: half the pipe fills in 2 ms.
  CHECK(TeeReadPause(us(4'000), 256 << 10, pipe) == us(2'000));
  // A default 64 KiB pipe at the same rate: 0.5 ms.
  CHECK(TeeReadPause(us(4'000), 256 << 10, 64 << 10) == us(500));
  // Faster than a pause is worth: read again at once.
  CHECK(TeeReadPause(us(100), 256 << 10, 64 << 10) == us(0));
}

}  // namespace
}  // namespace ctrun::launcher
