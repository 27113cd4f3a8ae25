// Hang forensics, the pure part: the text of a stacks file (what SaveStacks
// writes, launcher/forensics/stack_dump.h) and the one frame of it that a
// failure report names. No I/O; thread-safe.
//
// A stacks file reads:
//
//   ctrun: stacks of worker local_rank 0 (pid 1234), <why>
//
//   Python threads (most recent call first):
//   Thread 0x00007f... (LWP 1234, main thread; most recent call first):
//     File "/job/train.py", line 8 in stuck_in_allreduce_wait
//     ...
//
//   Native threads (gdb: thread apply all bt):
//   Thread 1 (Thread 0x7f... (LWP 1234) "python3"):
//   #0  0x00007f... in __GI___clock_nanosleep (...) at ../sysdeps/...:48
//   ...
//
// The Python section is in faulthandler's format (python_stacks.h writes
// it); it is there only for a Python worker.
#pragma once

#include <string>
#include <string_view>

namespace ctrun::launcher {

// The heading of each section, as written and as searched for.
inline constexpr std::string_view kPythonStacksHeading = "Python threads (most recent call first):";
inline constexpr std::string_view kNativeStacksHeading = "Native threads (gdb: thread apply all bt):";

// The whole file: `header` (one line, no newline), then the Python section
// when `python` is not empty (its frames, or why they could not be read),
// then the native section. `gdb_output` is gdb's
// whole output: its chatter before the first "Thread " line is dropped, or
// kept entire when there is no such line (then it says why, e.g. "ptrace:
// Operation not permitted.").
std::string ComposeStacks(std::string_view header, std::string_view python,
                          std::string_view gdb_output);

// The frame a report names, "" when there is none:
//  - with a Python section: the innermost frame of the main thread
//    ("main thread;" in its heading, or faulthandler's "Current thread"),
//    else of the first thread,
//    as "stuck_in_allreduce_wait (/job/train.py:8)";
//  - else the innermost frame of gdb's thread 1 (the main thread) outside the
//    C library (a frame "from .../libc.so.6" or at glibc's own sources,
//    "../sysdeps/", "./nptl/"), else its frame #0, as
//    "stuck_in_native_wait at /src/stuck.c:7" (the location after " at " or
//    " from ", the arguments left out).
std::string InnermostFrame(std::string_view stacks);

}  // namespace ctrun::launcher
