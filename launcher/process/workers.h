// WorkerSet: the local group of worker processes, and the only code in ctrun
// that forks, execs, reaps and signals process groups.
//
// Each worker is started in its own session (setsid), so its process group id
// equals its pid and holds its descendants; it gets PR_SET_PDEATHSIG(SIGKILL)
// so it dies with ctrun. ctrun is a child subreaper (see Reaper), so
// descendants orphaned by a dead worker are re-parented to ctrun, reaped by it,
// and still counted as members of their worker's group until they exit.
//
// Thread model: everything runs on the io_context given at construction; the
// callbacks are invoked from it. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace ctrun::launcher {

class OrphanGuard;

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
};

struct WorkerExit {
  int local_rank = 0;
  pid_t pid = 0;
  int exit_code = 0;         // >= 0: exit status; < 0: killed by signal -exit_code
  int64_t epoch_seconds = 0; // wall clock when ctrun reaped it
};

// Reaper: owns SIGCHLD for the whole process. Makes ctrun a child subreaper
// and reaps every child (workers, their orphaned descendants, the orphan
// guard), dispatching each reaped pid to whoever registered it. Unregistered
// pids are reaped silently. Create exactly one, before any child exists.
class Reaper {
 public:
  using ExitCallback = std::function<void(pid_t pid, int wait_status)>;

  explicit Reaper(boost::asio::io_context& io);
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // `cb` runs once when `pid` is reaped. Register right after fork.
  void Register(pid_t pid, ExitCallback cb);
  // Runs after every batch of reaped children (e.g. to re-check groups).
  void OnAnyExit(std::function<void()> cb) { on_any_ = std::move(cb); }

 private:
  void Arm();
  void ReapAll();

  boost::asio::signal_set sigchld_;
  std::map<pid_t, ExitCallback> waiting_;
  std::function<void()> on_any_;
};

class WorkerSet {
 public:
  using ExitHandler = std::function<void(const WorkerExit&)>;

  // `reaper` and `guard` (may be null) must outlive the WorkerSet.
  WorkerSet(boost::asio::io_context& io, Reaper& reaper, OrphanGuard* guard);
  ~WorkerSet();
  WorkerSet(const WorkerSet&) = delete;
  WorkerSet& operator=(const WorkerSet&) = delete;

  // Starts one process per spec. `pipes` receives, per spec, the read ends of
  // the stdout/stderr pipes requested with Mode::kPipe (-1 otherwise); the
  // caller owns them. `on_exit` runs once per worker when it is reaped.
  // Errors: IOError when a file cannot be opened or fork fails; NotFound /
  // FailedPrecondition when exec fails (the message names argv[0] and errno).
  // On error every worker already started is killed and reaped before return.
  Status Start(const std::vector<WorkerSpec>& specs, ExitHandler on_exit,
               std::vector<std::pair<int, int>>* pipes);

  // Sends `sig` to every worker's process group that still has members.
  void Signal(int sig);

  // Sends `sig` to every live group, then SIGKILL to the groups still alive
  // after `grace`. `done` runs once every worker has been reaped and every
  // group is empty (immediately, via post, if that is already so). A second
  // Close before `done` escalates: SIGKILL at once, same `done` semantics.
  void Close(int sig, Duration grace, std::function<void()> done);

  bool AllReaped() const;
  std::vector<pid_t> Pids() const;

 private:
  struct Worker {
    int local_rank;
    pid_t pid;
    bool reaped = false;
    bool group_empty = false;
  };

  void HandleExit(size_t index, int wait_status);
  void CheckClosed();
  bool GroupAlive(Worker& w);

  boost::asio::io_context& io_;
  Reaper& reaper_;
  OrphanGuard* guard_;
  std::vector<Worker> workers_;
  ExitHandler on_exit_;
  boost::asio::steady_timer kill_timer_;
  std::function<void()> close_done_;
  bool closing_ = false;
};

// Decodes a waitpid status into WorkerExit's convention (-signal or code).
int ExitCodeFromWaitStatus(int wait_status);

}  // namespace ctrun::launcher
