// Hang forensics: before ctrun kills a worker for a hang (its heartbeat
// expired, or it ignored the stop signal past the shutdown grace), it saves
// the worker's stacks to a file (stack_text.h's format):
//  - its Python frames, every thread's, read from outside the process
//    (launcher/forensics/python_stacks.h): nothing runs in the worker and
//    nothing of its memory is written, so it works where gdb's calls into a
//    process fail (hosts with Intel AMX) and cannot harm the worker;
//  - its native frames, every thread's: gdb (Debian's, from PATH) attaches
//    for a bounded time and runs `thread apply all bt` (reads only).
// docs/reliability.md ("Hang forensics") says more.
//
// Both need ptrace rights over the worker: ctrun's children are its
// siblings, which Yama's ptrace_scope 0 allows (same user), and 1 does only
// because each worker names ctrun its ptracer (PR_SET_PTRACER, workers.cc).
// When they are refused, the file says why and the kill goes on.
//
// Never blocks: the Python frames are read at Start (a bounded walk, a few
// milliseconds); each gdb's end is awaited on the io_context through a
// pidfd. Thread model: the io_context's thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
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
// scripts, no debuginfod, every thread's backtrace. Nothing that runs code
// in the target.
std::vector<std::string> GdbArgv(pid_t pid);

// One save of the stacks of some workers, all at once.
class StackDump : public std::enable_shared_from_this<StackDump> {
 public:
  // One Status per target: Ok when the stacks were saved; NotFound when gdb
  // is not on PATH (the Python frames are saved all the same);
  // FailedPrecondition when gdb could not attach (the message quotes it:
  // ptrace refused); DeadlineExceeded when gdb was late (the file has what
  // it printed by then); IOError when a file cannot be written.
  using Done = std::function<void(const std::vector<StackDumpTarget>&, const std::vector<Status>&)>;

  // `io` must outlive the dump. Call Start once.
  static std::shared_ptr<StackDump> Create(boost::asio::io_context& io);
  ~StackDump();
  StackDump(const StackDump&) = delete;
  StackDump& operator=(const StackDump&) = delete;

  // Reads each target's Python frames now, starts one gdb per target, and
  // calls `done` (posted, never from within Start) when every gdb has ended
  // or `timeout` has passed: then a gdb still running is killed with its
  // process group, and its worker sent SIGCONT (in case gdb left it
  // stopped). The dump keeps itself alive until its gdbs are reaped.
  void Start(std::vector<StackDumpTarget> targets, Duration timeout, Done done);

  // Ends it now, as if the timeout had passed (`done` is still called,
  // posted). Idempotent; nothing after `done` was called.
  void Cancel();

  // Ends it now without calling `done` (its owner is going away).
  void Abandon();

  bool finished() const { return finished_; }

 private:
  explicit StackDump(boost::asio::io_context& io);
  struct Gdb;
  void Spawn(size_t i);
  void Watch(size_t i);
  void OnGdbExited(size_t i);
  void Finish(bool timed_out);

  boost::asio::io_context& io_;
  boost::asio::steady_timer deadline_;
  std::vector<StackDumpTarget> targets_;
  std::vector<std::unique_ptr<Gdb>> gdbs_;
  Duration timeout_{};
  Done done_;
  bool finished_ = false;
};

}  // namespace ctrun::launcher
