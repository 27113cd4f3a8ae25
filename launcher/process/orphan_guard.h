// OrphanGuard: makes sure no worker outlives ctrun, even when ctrun itself is
// killed with SIGKILL.
//
// Start() starts a tiny guard process before ctrun starts any thread. ctrun
// tells it, over a pipe whose write end only ctrun holds, which worker process
// groups exist. When that pipe reaches end-of-file — ctrun exited, however it
// died — the guard SIGKILLs every group it was told about and every process in
// those groups' sessions (descendants that moved to another process group),
// then exits. Workers also carry PR_SET_PDEATHSIG(SIGKILL); the guard is what
// catches their descendants, which PDEATHSIG does not reach.
//
// The guard is made with clone(CLONE_VM) on x86-64 and AArch64 (fork
// elsewhere, or where a sandbox refuses that): it shares ctrun's memory, so
// starting it copies no page tables and ctrun takes no copy-on-write faults
// afterwards (a fork cost ~0.4 ms of every launch). It runs on a stack and
// state of its own and makes its system calls without libc. One consequence
// of sharing memory: should the OOM killer ever pick ctrun (the smallest
// process of a job), it kills the guard with it; the workers still die by
// PDEATHSIG. (valgrind refuses such a child: run ctrun's workers under it,
// not ctrun.)
//
// The guard ignores the terminal and job-control signals sent to ctrun's
// process group, and resets any handler of ctrun's it was made with to the
// default. It is made with every signal blocked and unblocks them only once
// those dispositions are set, so a SIGINT sent at once cannot end it (Start
// blocks them in the calling thread around the clone). Thread model: Watch/Unwatch from the thread that owns the
// WorkerSet. While ctrun's loop runs, the Reaper may reap the guard like any
// child (tell the guard with Reaped()); on ctrun's way out, Stop() (or the
// destructor) ends and reaps it, so that ctrun never exits with its guard
// still alive: nothing of ctrun's outlives ctrun unless ctrun was killed.
#pragma once

#include <sys/types.h>

#include <memory>

#include "base/result.h"

namespace ctrun::launcher {

class OrphanGuard {
 public:
  // Starts the guard. Errors: IOError when pipe, mmap or clone fails.
  static Result<std::unique_ptr<OrphanGuard>> Start();
  ~OrphanGuard();  // Stop(), then frees the guard's stack
  OrphanGuard(const OrphanGuard&) = delete;
  OrphanGuard& operator=(const OrphanGuard&) = delete;

  // Closes the pipe: the guard kills what is still watched (nothing after
  // HandOverAtExit found nothing left), then exits; Stop() waits for that
  // and reaps it. Call it only from the thread that owns the guard, once no
  // worker may still be started. Idempotent.
  void Stop();
  // The Reaper has reaped the guard's pid: Stop() must not wait for it.
  void Reaped() { reaped_ = true; }

  // A worker whose process group (and session) id is `pgid` was started.
  void Watch(pid_t pgid);
  // That group is empty; the guard forgets it (its id may be reused).
  void Unwatch(pid_t pgid);
  // For ctrun's way out, after the workers have exited. A worker's
  // descendant left behind in another process group (a group that emptied
  // was unwatched) is re-parented to ctrun: the guard is told to kill its
  // session too. When nothing but the guard is left below ctrun, the guard is
  // told that there is nothing to kill, and exits without scanning /proc.
  void HandOverAtExit();

  pid_t pid() const { return pid_; }

 private:
  OrphanGuard(pid_t pid, int fd, void* mapping) : pid_(pid), fd_(fd), mapping_(mapping) {}
  void Send(char op, pid_t pgid);

  pid_t pid_;
  int fd_;
  void* mapping_;  // the guard's stack and state
  bool reaped_ = false;
};

}  // namespace ctrun::launcher
