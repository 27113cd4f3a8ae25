// Hang forensics with a real gdb against real processes: a process to
// attach to (the stacks are saved), one gone (gdb cannot attach: the file
// says why), and a zero timeout (gdb is stopped, its target left running).
// Needs gdb on PATH (scripts/install-deps.sh installs it).
#include "launcher/process/stack_dump.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "launcher/process/stack_text.h"

namespace ctrun::launcher {
namespace {

using std::chrono::seconds;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Sleeper {
  pid_t pid = ::fork();
  Sleeper() {
    if (pid == 0) {
      ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Sleeper() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

std::string TempPath(const char* name) {
  char dir[] = "/tmp/ctrun_stacks_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  return std::string(dir) + "/" + name;
}

TEST_CASE("gdb's command line: batch, quiet, the Python dump into the file, then every thread") {
  const std::vector<std::string> argv = GdbArgv(42, "/l/a \"b\"/s.python.tmp");
  const std::string joined = [&] {
    std::string s;
    for (const std::string& a : argv) s += a + "\n";
    return s;
  }();
  CHECK(argv[0] == "gdb");
  CHECK(joined.find("-batch\n") != std::string::npos);
  CHECK(joined.find("-p\n42\n") != std::string::npos);
  CHECK(joined.find("open(\"/l/a \\\"b\\\"/s.python.tmp\", 1025)") != std::string::npos);
  CHECK(joined.find("_Py_DumpTracebackThreads($ctrun_fd, 0, 0)") != std::string::npos);
  CHECK(argv.back() == "thread apply all bt");
}

TEST_CASE("gdb saves a running process's native stacks, no Python section for a C program") {
  Sleeper s;
  const std::string path = TempPath("stacks.txt");
  const std::vector<Status> r = SaveStacksWithGdb({{3, s.pid, path, "a test"}}, seconds(60));
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
  CHECK_FALSE(std::ifstream(path + ".python.tmp"));
  CHECK_FALSE(std::ifstream(path + ".gdb.tmp"));
}

TEST_CASE("gdb cannot attach to a process that is gone: FailedPrecondition, the file says why") {
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  const std::string path = TempPath("stacks.txt");
  const std::vector<Status> r = SaveStacksWithGdb({{0, gone, path, "a test"}}, seconds(60));
  REQUIRE(r.size() == 1);
  CHECK(r[0].code() == Status::Code::kFailedPrecondition);
  CHECK(r[0].message().find("ptrace: ") != std::string::npos);
  CHECK(Read(path).find("ptrace: ") != std::string::npos);
}

TEST_CASE("a gdb past the timeout is stopped: DeadlineExceeded, the target left running") {
  Sleeper s;
  const std::string path = TempPath("stacks.txt");
  const std::vector<Status> r = SaveStacksWithGdb({{0, s.pid, path, "a test"}}, seconds(0));
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
