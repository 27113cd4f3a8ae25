// Hang forensics with a real gdb against real processes, on a real
// io_context: a process to attach to (the stacks are saved), a Python
// process (its Python frames too, and it goes on unharmed afterwards), one
// gone (gdb cannot attach: the file says why), and a zero timeout (gdb is
// stopped, its target left running). Needs gdb on PATH
// (scripts/install-deps.sh installs it).
#include "launcher/forensics/stack_dump.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "launcher/forensics/stack_text.h"
#include "tests/launcher/forensics/blocked_in.h"
#include "tests/launcher/forensics/sleeper.h"

namespace ctrun::launcher {
namespace {

using std::chrono::seconds;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const char* name) {
  char dir[] = "/tmp/ctrun_stacks_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  return std::string(dir) + "/" + name;
}

// Runs one dump to its end on a fresh io_context; the statuses it gave.
std::vector<Status> Save(const std::vector<StackDumpTarget>& targets, Duration timeout) {
  boost::asio::io_context io;
  std::vector<Status> out;
  bool called = false;
  StackDump::Create(io)->Start(targets, timeout,
                               [&](const std::vector<StackDumpTarget>&, const std::vector<Status>& r) {
                                 called = true;
                                 out = r;
                               });
  io.run();  // returns when the dump and its gdbs are all done
  REQUIRE(called);
  return out;
}

TEST_CASE("gdb's command line: batch, quiet, every thread's backtrace, no call into the target") {
  const std::vector<std::string> argv = GdbArgv(42);
  std::string joined;
  for (const std::string& a : argv) joined += a + "\n";
  CHECK(argv[0] == "gdb");
  CHECK(joined.find("-batch\n") != std::string::npos);
  CHECK(joined.find("-p\n42\n") != std::string::npos);
  CHECK(joined.find("call") == std::string::npos);
  CHECK(joined.find("print") == joined.find("print frame-arguments"));
  CHECK(argv.back() == "thread apply all bt");
}

TEST_CASE("gdb saves a running process's native stacks, no Python section for a C program") {
  Sleeper s;
  const std::string path = TempPath("stacks.txt");
  const std::vector<Status> r = Save({{3, s.pid, path, "a test"}}, seconds(60));
  REQUIRE(r.size() == 1);
  INFO(r[0].message());
  CHECK(r[0].ok());
  const std::string text = Read(path);
  INFO(text);
  CHECK(text.rfind("ctrun: stacks of worker local_rank 3 (pid " + std::to_string(s.pid) +
                       "), saved before it was killed: a test\n",
                   0) == 0);
  CHECK(text.find(kPythonStacksHeading) == std::string::npos);
  CHECK(text.find("Thread 1 (") != std::string::npos);
  CHECK_FALSE(InnermostFrame(text).empty());
  CHECK(::kill(s.pid, 0) == 0);  // gdb detached; the process runs on
  CHECK_FALSE(std::ifstream(path + ".gdb.tmp"));
}

TEST_CASE("a Python process: its frames and gdb's; stopped and continued, its sleep ends normally") {
  // It sleeps 2 s in a function, then prints how the sleep ended. The dump
  // (gdb attaches, so the sleep is interrupted and restarted) happens
  // within the sleep; SIGSTOP/SIGCONT as a job-control user would do, too.
  const std::string dir = TempPath("");
  const std::string script = dir + "sleeper.py";
  std::ofstream(script) << "import sys, time\n"
                           "def sleeping_in_test():\n"
                           "    sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
                           "    try:\n"
                           "        time.sleep(2)\n"
                           "        sys.stdout.write('slept\\n')\n"
                           "    except BaseException as e:\n"
                           "        sys.stdout.write('error: %r\\n' % (e,))\n"
                           "sleeping_in_test()\n";
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t py = ::fork();
  if (py == 0) {
    ::dup2(out[1], 1);
    ::execl("/usr/bin/python3", "python3", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  auto read_line = [&] {
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    return line;
  };
  REQUIRE(read_line() == "ready");
  REQUIRE(BlockedIn(py, SYS_clock_nanosleep));  // in time.sleep, line 5
  const std::string path = dir + "stacks.txt";
  const std::vector<Status> r = Save({{0, py, path, "a test"}}, seconds(60));
  REQUIRE(r.size() == 1);
  INFO(r[0].message());
  CHECK(r[0].ok());
  const std::string text = Read(path);
  INFO(text);
  CHECK(text.find(kPythonStacksHeading) != std::string::npos);
  CHECK(text.find("\", line 5 in sleeping_in_test\n") != std::string::npos);
  CHECK(InnermostFrame(text) == "sleeping_in_test (" + script + ":5)");
  CHECK(text.find("Thread 1 (") != std::string::npos);
  ::kill(py, SIGSTOP);
  ::kill(py, SIGCONT);
  CHECK(read_line() == "slept");  // no EINTR, no errno 514 (ERESTARTNOHAND)
  int status = 0;
  REQUIRE(::waitpid(py, &status, 0) == py);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  ::close(out[0]);
}

TEST_CASE("gdb cannot attach to a process that is gone: FailedPrecondition, the file says why") {
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  const std::string path = TempPath("stacks.txt");
  const std::vector<Status> r = Save({{0, gone, path, "a test"}}, seconds(60));
  REQUIRE(r.size() == 1);
  CHECK(r[0].code() == Status::Code::kFailedPrecondition);
  CHECK(r[0].message().find("ptrace: ") != std::string::npos);
  CHECK(Read(path).find("ptrace: ") != std::string::npos);
}

TEST_CASE("a gdb past the timeout is stopped: DeadlineExceeded, the target left running") {
  Sleeper s;
  const std::string path = TempPath("stacks.txt");
  const std::vector<Status> r = Save({{0, s.pid, path, "a test"}}, seconds(0));
  REQUIRE(r.size() == 1);
  CHECK(r[0].IsDeadlineExceeded());
  CHECK(r[0].message().find("--hang-stacks-timeout") != std::string::npos);
  // Not stopped: it still runs (or sleeps), never left in T by the killed gdb.
  const std::string stat = Read("/proc/" + std::to_string(s.pid) + "/stat");
  const char state = stat[stat.rfind(')') + 2];
  CHECK((state == 'S' || state == 'R'));
  CHECK(std::ifstream(path));
}

}  // namespace
}  // namespace ctrun::launcher
