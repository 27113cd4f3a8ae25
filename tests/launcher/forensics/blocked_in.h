// BlockedIn(pid, nr): waits, at most 10 s, until the thread `pid` is blocked
// in system call `nr` (read from /proc/PID/syscall). A test script that says
// "ready" is not yet at its next line when the test reads that word: the
// test waits for the call the line makes, then reads the stack.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

namespace ctrun::launcher {

inline bool BlockedIn(pid_t pid, long nr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const std::string path = "/proc/" + std::to_string(pid) + "/syscall";
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    long got = -1;
    if (in >> got && got == nr) return true;  // "running" while on a CPU
    ::usleep(1000);
  }
  return false;
}

}  // namespace ctrun::launcher
