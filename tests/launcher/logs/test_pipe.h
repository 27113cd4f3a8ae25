// TestPipe: a pipe's two ends for the tee tests (a worker's output, or a
// console to read back); closes what is left open.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

namespace ctrun::launcher::testing {

struct TestPipe {
  int r = -1, w = -1;
  TestPipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    r = fds[0];
    w = fds[1];
  }
  ~TestPipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
  TestPipe(const TestPipe&) = delete;
  TestPipe& operator=(const TestPipe&) = delete;

  // The read end, for a StreamTee that takes it over.
  int TakeRead() {
    const int fd = r;
    r = -1;
    return fd;
  }
  void Write(const std::string& text) const {
    REQUIRE(::write(w, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  }
  void CloseWrite() {
    ::close(w);
    w = -1;
  }
  // Closes the write end and reads everything written.
  std::string ReadAll() {
    CloseWrite();
    std::string s;
    char buf[4096];
    for (ssize_t n; (n = ::read(r, buf, sizeof buf)) > 0;) s.append(buf, static_cast<size_t>(n));
    return s;
  }
};

}  // namespace ctrun::launcher::testing
