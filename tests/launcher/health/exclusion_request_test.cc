#include "launcher/health/exclusion_request.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

namespace ctrun::launcher {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ctrun_exclusion_test_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string path;
};

TEST_CASE("An exclusion request's reason is its first non-blank line, trimmed") {
  TempDir d;
  const std::string file = d.path + "/exclude_node";
  CHECK_FALSE(ReadExclusionRequest(file).has_value());
  std::ofstream(file) << "\n   GPU 3: ECC errors  \nmore\n";
  CHECK(ReadExclusionRequest(file) == std::optional<std::string>("GPU 3: ECC errors"));
  std::ofstream(file, std::ios::trunc).close();
  CHECK(ReadExclusionRequest(file) == std::optional<std::string>("(no reason given)"));
}

TEST_CASE("ExclusionWatch removes a stale request, then reports a new one once") {
  TempDir d;
  const std::string file = d.path + "/exclude_node";
  std::ofstream(file) << "stale\n";
  boost::asio::io_context io;
  std::vector<std::string> seen;
  ExclusionWatch watch(io, file, [&](const std::string& reason) { seen.push_back(reason); });
  CHECK_FALSE(std::filesystem::exists(file));
  watch.Check();
  CHECK(seen.empty());
  CHECK_FALSE(watch.watching());  // no inotify instance for the first kWatchAfter
  while (!watch.watching() && io.run_one() > 0) {
  }
  REQUIRE(watch.watching());
  CHECK(seen.empty());
  std::ofstream(file) << "NIC down\n";  // closed after writing: the inotify event
  while (seen.empty() && io.run_one() > 0) {
  }
  CHECK(seen == std::vector<std::string>{"NIC down"});
  watch.Check();
  CHECK(seen.size() == 1);
}

TEST_CASE("ExclusionWatch: a request made before the watch starts is reported when it starts") {
  TempDir d;
  const std::string file = d.path + "/exclude_node";
  boost::asio::io_context io;
  std::vector<std::string> seen;
  ExclusionWatch watch(io, file, [&](const std::string& reason) { seen.push_back(reason); });
  std::ofstream(file) << "GPU 1 fell off the bus\n";
  while (seen.empty() && io.run_one() > 0) {
  }
  CHECK(seen == std::vector<std::string>{"GPU 1 fell off the bus"});
  CHECK(watch.watching());
}

}  // namespace
}  // namespace ctrun::launcher
