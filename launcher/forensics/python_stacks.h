// A live CPython process's Python stacks, read from outside: the frames of
// every thread, as file, line and function, taken from the interpreter's
// own structures through process_vm_readv (launcher/forensics/process_memory.h),
// the way py-spy and austin read them. Nothing runs in the process, nothing
// of its memory is written, and it is not stopped: a thread that runs
// while it is read may show a mix of two moments (a hung thread does not
// move). Every pointer followed is bounds-checked by the read itself, and
// every walk is bounded, so a process whose structures are torn or hostile
// gives a short or empty result, never a hang or a crash of the reader.
//
// How: _PyRuntime is found from the ELF symbols of the python binary or
// libpython that the process maps (/proc/PID/maps), the version from
// Py_Version (3.11+) or the file's name (3.10), and the layout from
// _Py_DebugOffsets in _PyRuntime (3.13+) or launcher/forensics/python_layout.h.
//
// Needs the ptrace access a gdb attach needs (ctrun's workers grant it to
// ctrun: PR_SET_PTRACER, launcher/process/workers.cc). Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::launcher {

struct PythonFrameInfo {
  std::string file;
  int line = -1;  // -1: not known
  std::string function;
};

struct PythonThreadInfo {
  uint64_t thread_id = 0;  // pthread_t, as faulthandler prints it
  uint64_t native_id = 0;  // the kernel's thread id (LWP); 0 when not known
  bool main = false;       // native_id is the process id
  std::vector<PythonFrameInfo> frames;  // innermost first
  bool truncated = false;  // the walk stopped at a bound or a pointer it could not read
};

struct PythonStacks {
  int major = 0;
  int minor = 0;
  std::vector<PythonThreadInfo> threads;  // the main thread first
};

// Bounds of one read.
inline constexpr int kMaxPythonThreads = 256;
inline constexpr int kMaxPythonFrames = 512;  // per thread

// The process's Python stacks. NotFound when it maps no CPython (no
// _PyRuntime in a python or libpython file it maps: a native worker);
// FailedPrecondition when its CPython's version has no known layout (the
// message names the version); IOError when its maps or memory cannot be
// read (it is gone, or ptrace access is refused: the message says which).
Result<PythonStacks> ReadPythonStacks(pid_t pid);

// faulthandler's text for `stacks`, one block per thread, the main thread
// first:
//   Thread 0x00007f0c1b2b7740 (LWP 1234, main thread; most recent call first):
//     File "/job/train.py", line 8 in stuck_in_allreduce_wait
// with "  ..." at the end of a block whose walk was cut short. Pure.
std::string FormatPythonStacks(const PythonStacks& stacks);

}  // namespace ctrun::launcher
