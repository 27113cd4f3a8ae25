// The orphan guard's start: a signal sent to it at once (as the terminal's
// SIGINT reaches ctrun's whole process group) must not end it, nor run one
// of this process's handlers in it (Catch2 installs some for SIGINT).
// Its whole life in this process: start, watch a real worker's session,
// stop (as ctrun does on its way out), and the guard reaped; what it watched,
// the group and a descendant that moved to a group of its own, killed.
#include "launcher/process/orphan_guard.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>

namespace ctrun::launcher {
namespace {

// What /proc/PID/status says of the guard's signals.
struct GuardSignals {
  bool gone = false;        // a zombie, or no such process
  bool blocked = true;      // SigBlk not all zero
  bool ignores_int = false; // SIGINT in SigIgn
};

GuardSignals ReadSignals(pid_t pid) {
  GuardSignals g;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) {
    g.gone = true;
    return g;
  }
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("State:", 0) == 0) {
      g.gone = line.find('Z') != std::string::npos || line.find('X') != std::string::npos;
    } else if (line.rfind("SigBlk:", 0) == 0) {
      g.blocked = std::stoull(line.substr(7), nullptr, 16) != 0;
    } else if (line.rfind("SigIgn:", 0) == 0) {
      g.ignores_int = (std::stoull(line.substr(7), nullptr, 16) >> (SIGINT - 1)) & 1;
    }
  }
  return g;
}

// Waits until the guard has set its dispositions and unblocked its signals
// (what was pending is then discarded or delivered), or is gone. Bounded:
// fails after 10 s.
GuardSignals WaitSettled(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  GuardSignals g = ReadSignals(pid);
  while (!g.gone && (g.blocked || !g.ignores_int) && std::chrono::steady_clock::now() < deadline) {
    const timespec tick{0, 100 * 1000};
    ::nanosleep(&tick, nullptr);
    g = ReadSignals(pid);
  }
  return g;
}

// Pins this process to one of its CPUs for its lifetime; restores it after.
class OneCpu {
 public:
  OneCpu() {
    pinned_ = ::sched_getaffinity(0, sizeof(before_), &before_) == 0;
    if (!pinned_) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &before_)) {
        CPU_SET(c, &one);
        break;
      }
    }
    ::sched_setaffinity(0, sizeof(one), &one);
  }
  ~OneCpu() {
    if (pinned_) ::sched_setaffinity(0, sizeof(before_), &before_);
  }
  OneCpu(const OneCpu&) = delete;
  OneCpu& operator=(const OneCpu&) = delete;

 private:
  cpu_set_t before_;
  bool pinned_ = false;
};

TEST_CASE("orphan guard: a SIGINT sent as soon as it is started does not end it") {
  // On one CPU the parent returns from clone and signals before the child
  // has run in most tries: the window the signal mask closes. The check is
  // of the outcome, whichever ran first.
  OneCpu pin;
  for (int i = 0; i < 50; ++i) {
    Result<std::unique_ptr<OrphanGuard>> guard = OrphanGuard::Start();
    REQUIRE(guard.ok());
    const pid_t pid = (*guard)->pid();
    REQUIRE(::kill(pid, SIGINT) == 0);
    const GuardSignals g = WaitSettled(pid);
    INFO("try " << i);
    REQUIRE_FALSE(g.gone);
    CHECK_FALSE(g.blocked);
    CHECK(g.ignores_int);
    // Not dead and not yet reaped either.
    siginfo_t info{};
    REQUIRE(::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0);
    CHECK(info.si_pid == 0);
    (*guard)->Stop();
  }
}


// This process as a child subreaper for the test's length (as ctrun is), so
// that a worker's orphaned descendant is re-parented here and can be reaped.
class Subreaper {
 public:
  Subreaper() {
    ::prctl(PR_GET_CHILD_SUBREAPER, &before_);
    REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  }
  ~Subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, before_); }
  Subreaper(const Subreaper&) = delete;
  Subreaper& operator=(const Subreaper&) = delete;

 private:
  int before_ = 0;
};

// Starts a stand-in worker as WorkerSet does (its own session: group id and
// session id are its pid; then exec, which closes the guard's pipe in it)
// with a descendant that moved to a process group of its own in that
// session. Both end up in `sleep 600`. Returns their pids once both are in
// place.
std::pair<pid_t, pid_t> StartWorkerWithEscapee() {
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  char* const sleep_argv[] = {const_cast<char*>("sleep"), const_cast<char*>("600"), nullptr};
  const pid_t worker = ::fork();
  REQUIRE(worker >= 0);
  if (worker == 0) {
    if (::setsid() < 0) ::_exit(1);
    const pid_t escapee = ::fork();
    if (escapee == 0) {
      if (::setpgid(0, 0) != 0) ::_exit(1);
      const pid_t self = ::getpid();
      if (::write(ready[1], &self, sizeof(self)) != sizeof(self)) ::_exit(1);
      ::execv("/bin/sleep", sleep_argv);
      ::_exit(127);
    }
    if (escapee < 0) ::_exit(1);
    ::execv("/bin/sleep", sleep_argv);
    ::_exit(127);
  }
  ::close(ready[1]);
  pid_t escapee = -1;
  const ssize_t n = ::read(ready[0], &escapee, sizeof(escapee));  // EOF if a step failed
  ::close(ready[0]);
  REQUIRE(n == static_cast<ssize_t>(sizeof(escapee)));
  return {worker, escapee};
}

// Waits, 30 s at most, until the process behind `pidfd` has ended; then
// reaps it (it is this process's child by then) and returns its wait status.
int AwaitAndReap(int pidfd, pid_t pid) {
  pollfd p{pidfd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 30 * 1000) == 1);
  int status = 0;
  pid_t got;
  while ((got = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  REQUIRE(got == pid);
  ::close(pidfd);
  return status;
}

int PidFd(pid_t pid) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  REQUIRE(fd >= 0);
  return fd;
}

TEST_CASE("orphan guard: start, watch, stop, reaped; what it watched is killed") {
  Subreaper subreaper;
  Result<std::unique_ptr<OrphanGuard>> started = OrphanGuard::Start();
  REQUIRE(started.ok());
  OrphanGuard& guard = **started;
  const pid_t guard_pid = guard.pid();
  const auto [worker, escapee] = StartWorkerWithEscapee();
  guard.Watch(worker);  // the worker's group and session id (and, should a check fail, killed at ~OrphanGuard)
  const int worker_fd = PidFd(worker);
  const int escapee_fd = PidFd(escapee);

  // ctrun's way out: the pipe closes, the guard kills what it watches and
  // exits; Stop waits for it and reaps it.
  guard.Stop();
  CHECK(::waitpid(guard_pid, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);  // reaped: no zombie left
  CHECK(::kill(guard_pid, 0) == -1);
  CHECK(errno == ESRCH);

  // Both were SIGKILLed: the group, and the session scan's escapee.
  const int worker_status = AwaitAndReap(worker_fd, worker);
  CHECK(WIFSIGNALED(worker_status));
  CHECK(WTERMSIG(worker_status) == SIGKILL);
  const int escapee_status = AwaitAndReap(escapee_fd, escapee);
  CHECK(WIFSIGNALED(escapee_status));
  CHECK(WTERMSIG(escapee_status) == SIGKILL);
  guard.Stop();  // idempotent
}

}  // namespace
}  // namespace ctrun::launcher
