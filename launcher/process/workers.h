// WorkerSet: the local group of worker processes, and the only code in ctrun
// that forks, execs, reaps and signals process groups (the gdb of hang
// forensics is the one other child it makes: launcher/forensics/stack_dump.h).
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

#include <sys/resource.h>
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "launcher/process/worker_group.h"

namespace ctrun::launcher {

class OrphanGuard;
class StackDump;

// ChildReaper: where WorkerSet learns that its children were reaped. The
// real one is Reaper; tests/launcher/process/workers_test.cc fakes it (a
// child nobody reaps stays a zombie: the stand-in for one SIGKILL cannot end).
class ChildReaper {
 public:
  // `max_rss_kib`: the child's peak resident memory (wait4's ru_maxrss; 0
  // when not known).
  using ExitCallback = std::function<void(pid_t pid, int wait_status, int64_t max_rss_kib)>;
  virtual ~ChildReaper() = default;
  // `cb` runs once when `pid` is reaped. Register right after fork.
  virtual void Register(pid_t pid, ExitCallback cb) = 0;
  // Runs after every batch of reaped children (e.g. to re-check groups);
  // null clears it.
  virtual void OnAnyExit(std::function<void()> cb) = 0;
};

// Reaper: owns SIGCHLD for the whole process. Makes ctrun a child subreaper
// and reaps every child (workers, their orphaned descendants, the orphan
// guard), dispatching each reaped pid to whoever registered it. Unregistered
// pids are reaped silently. Create exactly one, before any child exists.
class Reaper : public ChildReaper {
 public:
  explicit Reaper(boost::asio::io_context& io);
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  void Register(pid_t pid, ExitCallback cb) override;
  void OnAnyExit(std::function<void()> cb) override { on_any_ = std::move(cb); }

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
  WorkerSet(boost::asio::io_context& io, ChildReaper& reaper, OrphanGuard* guard);
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

  // `sig` and SIGKILL go to whole process groups; when a worker exits
  // within the grace, what is left of its group gets `sig` once more (a
  // process forked while `sig` was in flight can miss it: a shell blocks
  // signals around its fork, and a blocked signal does not pass to the
  // child). `done` waits for every
  // worker to be reaped and every group to be empty (it is posted when that
  // is already so), or for the kill timeout: then it lists each unreaped
  // worker and each member left in a worker's process group, with its
  // state from /proc/PID/stat.
  void Close(int sig, Duration grace, Duration kill_timeout, CloseHandler done) override;

  // launcher/forensics/stack_dump.h; also at the end of the shutdown grace,
  // before SIGKILL, for every worker still running (the SIGKILL waits for
  // it, at most the stacks_timeout). A Close with SIGKILL, or a second Close,
  // cuts a save short.
  void SaveStacks(int local_rank, const std::string& why) override;

  std::vector<pid_t> Pids() const override;

  // Every process started from now on gets `limit` as its RLIMIT_NOFILE:
  // the limit ctrun had before it raised its own (base/open_files.h).
  void SetChildOpenFilesLimit(const struct rlimit& limit) { child_nofile_ = limit; }

 private:
  struct Worker {
    int local_rank;
    pid_t pid;
    std::string stacks_file;  // "" = no hang forensics
    Duration stacks_timeout{};
    bool reaped = false;
    bool group_empty = false;
    bool stacks_saved = false;
  };

  // Forks the worker of `spec` (its stdio set up, exec checked later through
  // the fd appended to *status_fds, one per worker forked) and sets *pipe to
  // its pipes' read ends. IOError when a file, pipe or fork fails.
  Status Fork(const WorkerSpec& spec, pid_t self, std::pair<int, int>* pipe,
              std::vector<int>* status_fds);
  void HandleExit(size_t index, int wait_status, int64_t max_rss_kib);
  // Starts saving the stacks of the workers at `indices` that have a stacks
  // file, are still running and were not saved before, all at once; `then`
  // runs (on the io_context) when that save ends, or at once when there is
  // nothing to save. One save at a time: while one runs, workers not in it
  // are not saved.
  void SaveStacksOf(const std::vector<size_t>& indices, const std::string& why, std::function<void()> then);
  // Close's first step, held back while a save runs: `sig`, then the grace.
  void SignalAndWait(int sig, Duration grace);
  // Ends a running save now (its files keep what there is).
  void CutSaveShort();
  void CheckClosed();
  bool GroupAlive(Worker& w);
  // Sends SIGKILL to every live group; the first time in a close, starts
  // the kill timeout.
  void Kill();
  // The kill timeout expired: lists what is left and ends the close.
  void GiveUp();
  std::vector<StuckProcess> Stuck();
  void EndClose(const std::vector<StuckProcess>& stuck);

  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  OrphanGuard* guard_;
  std::optional<struct rlimit> child_nofile_;  // unset: children inherit ctrun's
  std::vector<Worker> workers_;
  ExitHandler on_exit_;
  boost::asio::steady_timer kill_timer_;   // the grace, then SIGKILL
  boost::asio::steady_timer stuck_timer_;  // the kill timeout, then GiveUp
  Duration kill_timeout_{};
  bool killed_ = false;                    // this close has sent SIGKILL
  int close_signal_ = 0;                   // this close's signal, once sent
  CloseHandler close_done_;
  bool closing_ = false;
  std::shared_ptr<StackDump> dump_;  // the save in progress; null when none
  std::function<void()> after_dump_;  // what waits for it (a held-back signal)
  // The signals whose disposition in ctrun is not SIG_DFL, read at Start():
  // the only ones a child must reset before exec.
  std::vector<int> reset_signals_;
};

// Decodes a waitpid status into WorkerExit's convention (-signal or code).
int ExitCodeFromWaitStatus(int wait_status);

}  // namespace ctrun::launcher
