#include "launcher/logs/console_dedup.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "launcher/logs/stream_tee.h"

namespace ctrun::launcher {
namespace {

// A pipe's two ends; closes what is left open.
struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    r = fds[0];
    w = fds[1];
  }
  ~Pipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
  void CloseWrite() {
    ::close(w);
    w = -1;
  }
  std::string ReadAll() {
    CloseWrite();
    std::string s;
    char buf[4096];
    for (ssize_t n; (n = ::read(r, buf, sizeof buf)) > 0;) s.append(buf, static_cast<size_t>(n));
    return s;
  }
};

// Runs `texts` (one per local rank) through StreamTees that share one
// ConsoleDedup whose window never closes during the test: what reaches the
// console is decided by FlushAll alone, not by timing.
std::string RunTees(const std::vector<std::string>& texts, bool prefix_console) {
  boost::asio::io_context io;
  Pipe console;
  LineDedup::Limits limits;
  limits.window = std::chrono::hours(1);
  ConsoleDedup dedup(io, console.w, limits);
  std::vector<std::unique_ptr<Pipe>> workers;
  std::vector<std::unique_ptr<StreamTee>> tees;
  for (size_t lr = 0; lr < texts.size(); ++lr) {
    workers.push_back(std::make_unique<Pipe>());
    Pipe& p = *workers.back();
    REQUIRE(::write(p.w, texts[lr].data(), texts[lr].size()) == static_cast<ssize_t>(texts[lr].size()));
    p.CloseWrite();
    TeeOptions options;
    options.prefix_console = prefix_console;
    options.dedup = &dedup;
    options.local_rank = static_cast<int>(lr);
    tees.push_back(std::make_unique<StreamTee>(io, p.r, -1, console.w, "[default" + std::to_string(lr) + "]:",
                                               nullptr, options));
    p.r = -1;  // the tee owns it
  }
  // Until every tee reaches its end-of-file (io.run() would wait for the timer).
  auto all_done = [&] {
    for (const auto& tee : tees) {
      if (!tee->done()) return false;
    }
    return true;
  };
  while (!all_done()) REQUIRE(io.run_one() == 1);
  dedup.FlushAll();
  return console.ReadAll();
}

TEST_CASE("Tees sharing a ConsoleDedup print an identical line once") {
  CHECK(RunTees({"same\nrank 0\n", "same\nrank 1\n", "same\nrank 2\n"}, true) ==
        "[ranks 0-2]: same\n[default0]:rank 0\n[default1]:rank 1\n[default2]:rank 2\n");
}

TEST_CASE("Without a console prefix a lone line prints as the worker wrote it") {
  CHECK(RunTees({"same\nmine\n", "same\n"}, false) == "[ranks 0-1]: same\nmine\n");
}

TEST_CASE("A last line without newline is completed before it is collapsed") {
  CHECK(RunTees({"tail", "tail"}, true) == "[ranks 0-1]: tail\n");
}

}  // namespace
}  // namespace ctrun::launcher
