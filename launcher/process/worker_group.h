// WorkerGroup: what the agent needs from its local group of worker
// processes, and nothing else — start a group, close it, learn of exits.
//
// The real one is WorkerSet (launcher/process/workers.h: fork, exec, process
// groups, SIGCHLD); tests/launcher/agent_test.cc scripts a fake one. Exits
// are events (a callback per worker), never polled.
//
// Thread model: every call and callback happens on the agent's io_context.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "launcher/process/cpu_binding.h"

namespace ctrun::launcher {

// Where a worker's stdout or stderr goes.
struct StdioTarget {
  enum class Mode { kInherit, kFile, kPipe, kNull };
  Mode mode = Mode::kInherit;
  std::string path;  // kFile only
};

struct WorkerSpec {
  int local_rank = 0;
  std::vector<std::string> argv;  // argv[0] is looked up in PATH if it has no '/'
  std::vector<std::string> env;   // "KEY=VALUE", the worker's whole environment
  StdioTarget out;
  StdioTarget err;
  WorkerBinding binding;          // --numa-binding; empty cpus: not bound
  // Hang forensics (launcher/forensics/stack_dump.h): where to save the
  // worker's stacks before it is killed for a hang; "" = never. When set, the
  // worker also lets ctrun's children ptrace it (PR_SET_PTRACER), which
  // Yama's ptrace_scope 1 asks for.
  std::string stacks_file;
  Duration stacks_timeout{};      // the most a save may delay the kill
};

struct WorkerExit {
  int local_rank = 0;
  pid_t pid = 0;
  int exit_code = 0;         // >= 0: exit status; < 0: killed by signal -exit_code
  int64_t epoch_seconds = 0; // wall clock when ctrun reaped it
  int64_t max_rss_kib = 0;   // its peak resident memory (wait4's ru_maxrss); 0 unknown
};

// A process of the group still there `kill_timeout` after SIGKILL: a worker
// not reaped, or a member of its process group (a worker's descendant).
// Usually in uninterruptible sleep (D: a hung driver or file system), or a
// zombie whose parent left the group and does not reap it.
struct StuckProcess {
  int local_rank = 0;  // the worker whose process group it is in
  pid_t pid = 0;
  bool is_worker = true;  // the worker itself, else a descendant of it
  std::string comm;       // its name per /proc/PID/stat ("" when unreadable)
  std::string state;      // e.g. "D (uninterruptible sleep)"; "unknown" when unreadable
};

class WorkerGroup {
 public:
  using ExitHandler = std::function<void(const WorkerExit&)>;

  virtual ~WorkerGroup() = default;

  // Starts one process per spec, replacing the previous group (which must
  // have been closed). `pipes` receives, per spec, the read ends of the
  // stdout/stderr pipes requested with Mode::kPipe (-1 otherwise); the
  // caller owns them. `on_exit` runs once per worker when it has exited.
  // Errors: IOError when a file cannot be opened or a process cannot be
  // made; NotFound / FailedPrecondition when argv[0] cannot be run (the
  // message names it); FailedPrecondition when a worker cannot take its
  // `binding` before exec (the message names the local rank and the call).
  // On error every worker already started has been sent SIGKILL, and
  // `on_exit` is never called for this group.
  virtual Status Start(const std::vector<WorkerSpec>& specs, ExitHandler on_exit,
                       std::vector<std::pair<int, int>>* pipes) = 0;

  // Called once when a Close completes: `stuck` is empty when every worker
  // (and every descendant in its process group) is gone; otherwise it lists
  // what was still there `kill_timeout` after SIGKILL, and the group has
  // stopped waiting for it (its later exits are not reported).
  using CloseHandler = std::function<void(const std::vector<StuckProcess>& stuck)>;

  // Sends `sig` to every worker still running, then SIGKILL to those still
  // running after `grace`, and gives up on them `kill_timeout` after the
  // SIGKILL. `done` runs once, on the io_context and never inside this call.
  // A second Close before `done` escalates: SIGKILL at once (the kill
  // timeout runs from the first SIGKILL), and `done` replaces the first one's.
  virtual void Close(int sig, Duration grace, Duration kill_timeout, CloseHandler done) = 0;

  // Starts saving the stacks of the worker of `local_rank` to its spec's
  // stacks_file (`why` goes into the file's first line), before it is
  // signalled for a hang. Never blocks: a Close that follows holds back its
  // signal, to every worker, until the save has ended (at most its
  // stacks_timeout later), so the stacks are those of the hang. At most once
  // per worker: a close's SIGKILL after the grace does not save it again.
  // Does nothing without a stacks_file, or for a worker already gone.
  virtual void SaveStacks(int /*local_rank*/, const std::string& /*why*/) {}

  // The pids of the current group, in spec order (empty before Start).
  virtual std::vector<pid_t> Pids() const = 0;
};

}  // namespace ctrun::launcher
