// Python stacks read from outside a real python3 (Debian's 3.11): the main
// thread and a second one, each blocked in a function of a script written
// here, with the exact lines; the process goes on afterwards; a process
// with no CPython is NotFound; the text is faulthandler's.
#include "launcher/forensics/python_stacks.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/launcher/forensics/blocked_in.h"
#include "tests/launcher/forensics/sleeper.h"

namespace ctrun::launcher {
namespace {

// The script blocks both threads, then says so on stdout; its line numbers
// are asserted below.
const char* const kScript = R"(import sys, threading
ready = threading.Event()
go = threading.Event()

def helper_thread_wait():
    ready.set()
    go.wait()

def outer():
    return stuck_in_main()

def stuck_in_main():
    threading.Thread(target=helper_thread_wait, name="helper", daemon=True).start()
    ready.wait()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    line = sys.stdin.readline()
    sys.stdout.write("went on: " + line)
    sys.stdout.flush()

outer()
)";

struct PythonChild {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
  std::string dir;

  PythonChild() {
    char d[] = "/tmp/ctrun_pystacks_XXXXXX";
    REQUIRE(::mkdtemp(d) != nullptr);
    dir = d;
    std::ofstream(dir + "/stuck.py") << kScript;
    int in[2], out[2];
    REQUIRE(::pipe(in) == 0);
    REQUIRE(::pipe(out) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[1]);
      ::close(out[0]);
      const std::string script = dir + "/stuck.py";
      ::execl("/usr/bin/python3", "python3", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_child = in[1];
    from_child = out[0];
  }
  ~PythonChild() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(to_child);
    ::close(from_child);
    std::system(("rm -rf " + dir).c_str());
  }
  std::string ReadLine() {
    std::string line;
    char c;
    while (::read(from_child, &c, 1) == 1) {
      line += c;
      if (c == '\n') break;
    }
    return line;
  }
};

const PythonFrameInfo* FindFrame(const PythonThreadInfo& t, const std::string& function) {
  for (const PythonFrameInfo& f : t.frames) {
    if (f.function == function) return &f;
  }
  return nullptr;
}

TEST_CASE("the frames of every thread of a blocked python3, with their lines; it goes on after") {
  PythonChild child;
  REQUIRE(child.ReadLine() == "ready\n");
  REQUIRE(BlockedIn(child.pid, SYS_read));  // in sys.stdin.readline(), line 17

  Result<PythonStacks> stacks = ReadPythonStacks(child.pid);
  REQUIRE(stacks.ok());
  CHECK(stacks->major == 3);
  CHECK(stacks->minor == 11);
  REQUIRE(stacks->threads.size() == 2);

  const PythonThreadInfo& main = stacks->threads[0];
  CHECK(main.main);
  CHECK(main.native_id == static_cast<uint64_t>(child.pid));
  CHECK_FALSE(main.truncated);
  REQUIRE(main.frames.size() == 3);
  CHECK(main.frames[0].function == "stuck_in_main");
  CHECK(main.frames[0].line == 17);  // sys.stdin.readline()
  CHECK(main.frames[0].file == child.dir + "/stuck.py");
  CHECK(main.frames[1].function == "outer");
  CHECK(main.frames[1].line == 10);
  CHECK(main.frames[2].function == "<module>");
  CHECK(main.frames[2].line == 21);

  const PythonThreadInfo& helper = stacks->threads[1];
  CHECK_FALSE(helper.main);
  CHECK(helper.native_id != 0);
  REQUIRE(helper.frames.size() >= 2);
  const PythonFrameInfo* wait = FindFrame(helper, "helper_thread_wait");
  REQUIRE(wait != nullptr);
  CHECK(wait->line == 7);
  CHECK(helper.frames[0].file.find("threading.py") != std::string::npos);  // inside Event.wait

  const std::string text = FormatPythonStacks(*stacks);
  CHECK(text.find("main thread; most recent call first):\n  File \"" + child.dir +
                  "/stuck.py\", line 17 in stuck_in_main\n") != std::string::npos);

  // Nothing was changed in it: the blocked read returns what is sent.
  REQUIRE(::write(child.to_child, "x\n", 2) == 2);
  CHECK(child.ReadLine() == "went on: x\n");
}

TEST_CASE("a process with no CPython is NotFound; a process that is gone is an IOError") {
  Sleeper s;
  const pid_t sleeper = s.pid;
  Result<PythonStacks> native = ReadPythonStacks(sleeper);
  CHECK(native.status().code() == Status::Code::kNotFound);
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);
  s.pid = -1;  // reaped here
  CHECK(ReadPythonStacks(sleeper).status().code() == Status::Code::kIOError);
}

TEST_CASE("faulthandler's text: one block per thread, ??? for an unknown line, ... when cut short") {
  PythonStacks s;
  PythonThreadInfo main;
  main.thread_id = 0x7f0c1b2b7740;
  main.native_id = 1234;
  main.main = true;
  main.frames = {{"/job/train.py", 8, "step"}, {"/job/train.py", -1, "<module>"}};
  PythonThreadInfo other;
  other.thread_id = 0x7f0c00001000;
  other.truncated = true;
  s.threads = {main, other};
  CHECK(FormatPythonStacks(s) ==
        "Thread 0x00007f0c1b2b7740 (LWP 1234, main thread; most recent call first):\n"
        "  File \"/job/train.py\", line 8 in step\n"
        "  File \"/job/train.py\", line ??? in <module>\n"
        "\n"
        "Thread 0x00007f0c00001000 (most recent call first):\n"
        "  ...\n");
}

}  // namespace
}  // namespace ctrun::launcher
