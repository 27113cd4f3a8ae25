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
#include "launcher/process/worker_group.h"

namespace ctrun::launcher {

class OrphanGuard;

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

// The real WorkerGroup. Start, Close and Pids keep WorkerGroup's contract;
// below, only what this implementation adds to it.
class WorkerSet : public WorkerGroup {
 public:
  // `reaper` and `guard` (may be null) must outlive the WorkerSet.
  WorkerSet(boost::asio::io_context& io, Reaper& reaper, OrphanGuard* guard);
  // Sends SIGKILL to every worker's process group that may still have members.
  ~WorkerSet() override;
  WorkerSet(const WorkerSet&) = delete;
  WorkerSet& operator=(const WorkerSet&) = delete;

  // Forks every worker (setsid, PDEATHSIG), then waits for each exec result.
  // IOError also when fork or pipe fails. On error every worker already
  // started gets SIGKILL on its process group before return; it is reaped
  // later by the Reaper, and `on_exit` is not called for it.
  Status Start(const std::vector<WorkerSpec>& specs, ExitHandler on_exit,
               std::vector<std::pair<int, int>>* pipes) override;

  // Sends `sig` to every worker's process group that still has members.
  void Signal(int sig);

  // `sig` and SIGKILL go to whole process groups; `done` waits for every
  // worker to be reaped and every group to be empty (it is posted when that
  // is already so).
  void Close(int sig, Duration grace, std::function<void()> done) override;

  std::vector<pid_t> Pids() const override;

 private:
  struct Worker {
    int local_rank;
    pid_t pid;
    bool reaped = false;
    bool group_empty = false;
  };

  // Forks the worker of `spec` (its stdio set up, exec checked later through
  // the fd appended to *status_fds, one per worker forked) and sets *pipe to
  // its pipes' read ends. IOError when a file, pipe or fork fails.
  Status Fork(const WorkerSpec& spec, pid_t self, std::pair<int, int>* pipe,
              std::vector<int>* status_fds);
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
  // The signals whose disposition in ctrun is not SIG_DFL, read at Start():
  // the only ones a child must reset before exec.
  std::vector<int> reset_signals_;
};

// Decodes a waitpid status into WorkerExit's convention (-signal or code).
int ExitCodeFromWaitStatus(int wait_status);

}  // namespace ctrun::launcher
