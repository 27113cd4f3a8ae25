// The orphan guard's start: a signal sent to it at once (as the terminal's
// SIGINT reaches ctrun's whole process group) must not end it, nor run one
// of this process's handlers in it (Catch2 installs some for SIGINT).
#include "launcher/process/orphan_guard.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
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

}  // namespace
}  // namespace ctrun::launcher
