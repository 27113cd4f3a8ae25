#include "launcher/logs/filtered_log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "launcher/logs/stream_tee.h"

namespace ctrun::launcher {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh empty file in $TMPDIR, removed at the end of the test.
struct TempFile {
  std::string path;
  TempFile() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ctrun_filtered_XXXXXX";
    int fd = ::mkstemp(pattern.data());
    REQUIRE(fd >= 0);
    ::close(fd);
    path = pattern;
  }
  ~TempFile() { ::unlink(path.c_str()); }
};

TEST_CASE("LineMatchesAny is Python's `any(needle in line)`") {
  CHECK(LineMatchesAny("loss=0.1\n", {"acc", "loss"}));
  CHECK_FALSE(LineMatchesAny("step 3\n", {"acc", "loss"}));
  CHECK_FALSE(LineMatchesAny("anything\n", {}));
  CHECK(LineMatchesAny("anything\n", {""}));  // torch's [""] from an empty value
  CHECK(LineMatchesAny("a,b\n", {"a,b"}));
}

TEST_CASE("WriteMatching keeps the prefixed lines whose text after the prefix matches") {
  TempFile f;
  auto log = FilteredLog::Open(f.path, {"loss", "["});
  REQUIRE(log.ok());
  // The prefix itself holds '[': only the text after it is searched.
  (*log)->WriteMatching("[default0]:step 1\n[default0]:loss 2\n[default0]:x[y\n", 11);
  log->reset();
  CHECK(ReadFile(f.path) == "[default0]:loss 2\n[default0]:x[y\n");
}

// Each of `lines` is in `text`, in this order (another rank's lines may come
// between them: the ranks' pipes are read in either order).
bool InOrder(const std::string& text, std::initializer_list<std::string_view> lines) {
  size_t at = 0;
  for (std::string_view line : lines) {
    at = text.find(line, at);
    if (at == std::string::npos) return false;
    at += line.size();
  }
  return true;
}

TEST_CASE("StreamTees of two ranks share one filtered file, a filter-only stream reaches the console raw") {
  TempFile filtered, console, rank0_file;
  auto log = FilteredLog::Open(filtered.path, {"loss"});
  REQUIRE(log.ok());
  const int console_fd = ::open(console.path.c_str(), O_WRONLY | O_APPEND);
  const int file_fd = ::open(rank0_file.path.c_str(), O_WRONLY | O_TRUNC);
  REQUIRE(console_fd >= 0);
  REQUIRE(file_fd >= 0);
  int p0[2], p1[2];
  REQUIRE(::pipe(p0) == 0);
  REQUIRE(::pipe(p1) == 0);
  boost::asio::io_context io;
  int finished = 0;
  {
    // Rank 0 is tee'd: its file, prefixed console lines, the filter.
    StreamTee tee0(io, p0[0], file_fd, console_fd, "[default0]:", [&] { ++finished; },
                   TeeOptions{true, log->get()});
    // Rank 1 is piped only for the filter: console bytes unprefixed, no file.
    StreamTee tee1(io, p1[0], -1, console_fd, "[default1]:", [&] { ++finished; },
                   TeeOptions{false, log->get()});
    const std::string out0 = "step 1\nloss 0.5\npartial loss";
    const std::string out1 = "loss 0.7\nnothing\n";
    REQUIRE(::write(p0[1], out0.data(), out0.size()) == static_cast<ssize_t>(out0.size()));
    REQUIRE(::write(p1[1], out1.data(), out1.size()) == static_cast<ssize_t>(out1.size()));
    ::close(p0[1]);
    ::close(p1[1]);
    io.run();
    CHECK(finished == 2);
  }
  ::close(console_fd);
  log->reset();
  const std::string filtered_text = ReadFile(filtered.path);
  // Line order between the ranks depends on which pipe is read first; each
  // rank's own lines keep their order.
  CHECK(filtered_text.size() == std::string("[default0]:loss 0.5\n[default0]:partial loss\n[default1]:loss 0.7\n").size());
  CHECK(InOrder(filtered_text, {"[default0]:loss 0.5\n", "[default0]:partial loss\n"}));
  CHECK(filtered_text.find("[default1]:loss 0.7\n") != std::string::npos);
  CHECK(ReadFile(rank0_file.path) == "step 1\nloss 0.5\npartial loss");
  const std::string console_text = ReadFile(console.path);
  CHECK(InOrder(console_text, {"[default0]:step 1\n", "[default0]:loss 0.5\n", "[default0]:partial loss\n"}));
  CHECK(console_text.find("loss 0.7\nnothing\n") != std::string::npos);
  CHECK(console_text.find("[default1]") == std::string::npos);
}

}  // namespace
}  // namespace ctrun::launcher
