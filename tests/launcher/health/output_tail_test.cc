#include "launcher/health/output_tail.h"

#include <catch2/catch.hpp>

#include "launcher/health/health_check.h"

namespace ctrun::launcher {
namespace {

using Lines = std::vector<std::string>;

TEST_CASE("OutputTail keeps the last lines, joined across pieces") {
  OutputTail tail(2);
  tail.Append("one\ntw");
  tail.Append("o\nthree\r\nfo");
  CHECK(tail.Lines() == Lines{"three", "fo"});
  tail.Append("ur\n");
  CHECK(tail.Lines() == Lines{"three", "four"});
}

TEST_CASE("OutputTail keeps blank lines and cuts long ones") {
  OutputTail tail(5, 4);
  tail.Append("\nabcdefgh\nxy");
  CHECK(tail.Lines() == Lines{"", "abcd...", "xy"});
}

TEST_CASE("OutputTail of nothing is no lines") { CHECK(OutputTail().Lines().empty()); }

TEST_CASE("The health report names the command, why, and the last lines indented") {
  HealthResult r;
  r.healthy = false;
  r.failure = "timed out after 5 s (--health-check-timeout)";
  r.last_lines = {"checking GPUs", "GPU 2: XID 79"};
  CHECK(FormatHealthReport("check.sh", r) ==
        "health check 'check.sh' timed out after 5 s (--health-check-timeout)\n  checking GPUs\n  GPU 2: XID 79");
}

}  // namespace
}  // namespace ctrun::launcher
