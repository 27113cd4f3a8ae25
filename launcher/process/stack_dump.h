// Hang forensics: before ctrun kills a worker for a hang (its heartbeat
// expired, or it ignored the stop signal past the shutdown grace), it saves
// the worker's stacks to a file: gdb (Debian's, from PATH) attaches for a
// bounded time and prints every thread's native frames; in a Python worker
// it also has CPython dump its own frames of every thread
// (_Py_DumpTracebackThreads, faulthandler's dumper: async-signal-safe, no
// GIL needed, in every CPython binary). Nothing of the worker's environment
// changes for this; docs/reliability.md ("Hang forensics") says why.
//
// gdb needs ptrace rights over the worker: ctrun's children are its
// siblings, which Yama's ptrace_scope 0 allows (same user), and 1 does only
// because each worker names ctrun its ptracer (PR_SET_PTRACER, workers.cc).
// When the attach is refused, the file says why and the kill goes on.
//
// Blocking: SaveStacksWithGdb returns within `timeout` (plus the time to kill and
// reap a gdb that is late). Call it on the thread that owns the workers.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace ctrun::launcher {

struct StackDumpTarget {
  int local_rank = 0;
  pid_t pid = 0;
  std::string path;  // the stacks file; replaced
  std::string why;   // for its first line, e.g. "its heartbeat expired"
};

// gdb's command line for `pid`: batch mode, no init files, no auto-loaded
// scripts, no debuginfod; CPython's dump appended to `python_file` (which
// must exist: it is opened without O_CREAT, in the worker), then every
// thread's backtrace.
std::vector<std::string> GdbArgv(pid_t pid, const std::string& python_file);

// Saves each target's stacks (stack_text.h's format) to its path: one gdb
// per target, all at once, waited for at most `timeout` together; a gdb
// still running then is killed (its worker sent SIGCONT, in case gdb left it
// stopped) and the file keeps what was there. One Status per target: Ok when
// the stacks were saved; NotFound when gdb is not on PATH; FailedPrecondition
// when gdb could not attach (the message quotes it: ptrace refused);
// DeadlineExceeded when gdb was late; IOError when a file cannot be written.
std::vector<Status> SaveStacksWithGdb(const std::vector<StackDumpTarget>& targets, Duration timeout);

}  // namespace ctrun::launcher
