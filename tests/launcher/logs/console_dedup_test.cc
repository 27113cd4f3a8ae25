#include "launcher/logs/console_dedup.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "launcher/logs/stream_tee.h"
#include "tests/launcher/logs/test_pipe.h"

namespace ctrun::launcher {
namespace {

using testing::TestPipe;

// Runs `texts` (one per local rank) through StreamTees that share one
// ConsoleDedup whose window never closes during the test: what reaches the
// console is decided by FlushAll alone, not by timing.
std::string RunTees(const std::vector<std::string>& texts, bool prefix_console) {
  boost::asio::io_context io;
  TestPipe console;
  LineDedup::Limits limits;
  limits.window = std::chrono::hours(1);
  ConsoleDedup dedup(io, console.w, limits);
  std::vector<std::unique_ptr<TestPipe>> workers;
  std::vector<std::unique_ptr<StreamTee>> tees;
  for (size_t lr = 0; lr < texts.size(); ++lr) {
    workers.push_back(std::make_unique<TestPipe>());
    TestPipe& p = *workers.back();
    p.Write(texts[lr]);
    p.CloseWrite();
    TeeOptions options;
    options.prefix_console = prefix_console;
    options.dedup = &dedup;
    options.local_rank = static_cast<int>(lr);
    tees.push_back(std::make_unique<StreamTee>(io, p.TakeRead(), -1, console.w,
                                               "[default" + std::to_string(lr) + "]:", nullptr, options));
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
