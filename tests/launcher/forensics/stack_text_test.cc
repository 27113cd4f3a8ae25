// Hang forensics, the pure part: a stacks file composed from CPython's dump
// and gdb's output (texts as gdb 13 and CPython 3.11 print them), and the
// innermost frame a failure report names.
#include "launcher/forensics/stack_text.h"

#include <catch2/catch.hpp>
#include <string>

namespace ctrun::launcher {
namespace {

const char* const kPython =
    "Thread 0x00007fae238976c0 (most recent call first):\n"
    "  File \"/job/w.py\", line 3 in other\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 982 in run\n"
    "\n"
    "Current thread 0x00007fae24601b80 (most recent call first):\n"
    "  File \"/job/w.py\", line 6 in stuck_in_allreduce_wait\n"
    "  File \"/job/w.py\", line 8 in <module>\n";

const char* const kGdbChatter =
    "[New LWP 19680]\n"
    "[Thread debugging using libthread_db enabled]\n"
    "Using host libthread_db library \"/lib/x86_64-linux-gnu/libthread_db.so.1\".\n"
    "0x00007fae23eed545 in __GI___clock_nanosleep () at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48\n"
    "\n";

const char* const kGdbNative =
    "Thread 2 (Thread 0x7fae238976c0 (LWP 19680) \"worker\"):\n"
    "#0  0x00007fae23eed545 in __GI___clock_nanosleep (clock_id=..., flags=...) at "
    "../sysdeps/unix/sysv/linux/clock_nanosleep.c:48\n"
    "#1  0x000055d0c0de1189 in helper_thread (arg=...) at /src/stuck.c:12\n"
    "\n"
    "Thread 1 (Thread 0x7fae24601b80 (LWP 19638) \"worker\"):\n"
    "#0  0x00007fae23eed545 in __GI___clock_nanosleep (clock_id=..., flags=...) at "
    "../sysdeps/unix/sysv/linux/clock_nanosleep.c:48\n"
    "#1  0x00007fae23ef1a33 in __GI___nanosleep (req=..., rem=...) at ../sysdeps/unix/sysv/linux/nanosleep.c:25\n"
    "#2  0x000055d0c0de11b2 in stuck_in_native_wait () at /src/stuck.c:7\n"
    "#3  main () at /src/stuck.c:20\n"
    "[Inferior 1 (process 19638) detached]\n";

TEST_CASE("stacks: a Python worker's file has both sections, gdb's chatter dropped") {
  const std::string text =
      ComposeStacks("ctrun: stacks of worker local_rank 0 (pid 19638)", kPython,
                    std::string(kGdbChatter) + kGdbNative);
  CHECK(text.rfind("ctrun: stacks of worker local_rank 0 (pid 19638)\n\n", 0) == 0);
  const size_t py = text.find(kPythonStacksHeading);
  const size_t native = text.find(kNativeStacksHeading);
  REQUIRE(py != std::string::npos);
  REQUIRE(native != std::string::npos);
  CHECK(py < native);
  CHECK(text.find("stuck_in_allreduce_wait") < native);
  CHECK(text.find("Using host libthread_db") == std::string::npos);
  CHECK(text.find("Thread 1 (Thread 0x7fae24601b80") > native);
}

TEST_CASE("stacks: without a Python frame there is no Python section") {
  const std::string text = ComposeStacks("h", "", kGdbNative);
  CHECK(text.find(kPythonStacksHeading) == std::string::npos);
  CHECK(text.find(kNativeStacksHeading) != std::string::npos);
}

TEST_CASE("stacks: gdb's output without a stack is kept whole: it says why") {
  const std::string text = ComposeStacks("h", "", "ptrace: Operation not permitted.\n");
  CHECK(text.find("ptrace: Operation not permitted.") != std::string::npos);
  CHECK(InnermostFrame(text).empty());
}

TEST_CASE("innermost frame: the current Python thread's first frame") {
  CHECK(InnermostFrame(ComposeStacks("h", kPython, kGdbNative)) ==
        "stuck_in_allreduce_wait (/job/w.py:6)");
}

TEST_CASE("innermost frame: the first Python thread's when none is marked current") {
  const char* const python =
      "Thread 0x00007fae238976c0 (most recent call first):\n"
      "  File \"/job/w.py\", line 3 in other\n";
  CHECK(InnermostFrame(ComposeStacks("h", python, kGdbNative)) == "other (/job/w.py:3)");
}

TEST_CASE("innermost frame: native, the main thread's first frame outside the C library") {
  CHECK(InnermostFrame(ComposeStacks("h", "", kGdbNative)) == "stuck_in_native_wait at /src/stuck.c:7");
}

TEST_CASE("innermost frame: native, frame #0 when every frame is the C library's") {
  const char* const gdb =
      "Thread 1 (Thread 0x7f (LWP 5) \"w\"):\n"
      "#0  0x00007f in pause () from /lib/x86_64-linux-gnu/libc.so.6\n"
      "#1  0x00007f in __libc_start_call_main () from /lib/x86_64-linux-gnu/libc.so.6\n";
  CHECK(InnermostFrame(ComposeStacks("h", "", gdb)) == "pause from /lib/x86_64-linux-gnu/libc.so.6");
}

TEST_CASE("innermost frame: a frame with neither address nor location") {
  const char* const gdb = "Thread 1 (Thread 0x7f (LWP 5) \"w\"):\n#0  spin ()\n";
  CHECK(InnermostFrame(ComposeStacks("h", "", gdb)) == "spin");
}

TEST_CASE("innermost frame: none in text that is not a stacks file") {
  CHECK(InnermostFrame("").empty());
  CHECK(InnermostFrame("Thread 1 (x):\n#0  f () at a.c:1\n").empty());  // no section heading
}

}  // namespace
}  // namespace ctrun::launcher
