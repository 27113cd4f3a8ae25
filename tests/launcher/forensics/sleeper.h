// A /bin/sleep child for the forensics tests, returned only once its exec
// is done: before, /proc/PID/maps is the forked test binary's, and during
// the exec it reads empty, so a test that looked then would see neither.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>

namespace ctrun::launcher {

struct Sleeper {
  pid_t pid = -1;

  Sleeper() {
    int done[2];
    REQUIRE(::pipe2(done, O_CLOEXEC) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(done[0]);
      ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(done[1]);
    char c;
    // The write end closes at the exec (it is close-on-exec): read sees EOF.
    ssize_t n;
    do {
      n = ::read(done[0], &c, 1);
    } while (n < 0 && errno == EINTR);
    ::close(done[0]);
    REQUIRE(n == 0);
  }
  ~Sleeper() {
    if (pid <= 0) return;  // never kill(-1): a test that reaped it set -1
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
};

}  // namespace ctrun::launcher
