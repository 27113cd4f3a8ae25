#include "launcher/ft/worker_lines.h"

#include <catch2/catch.hpp>
#include <string>

namespace ctrun::launcher {
namespace {

TEST_CASE("a sync line with and without a ballot", "[ft][lines]") {
  Result<FtWorkerLine> first = ParseFtWorkerLine("sync 1 0 40001 40002 -");
  REQUIRE(first.ok());
  CHECK(std::get<FtSyncLine>(*first) ==
        FtSyncLine{.local_rank = 1, .committed_step = 0, .ring_port = 40001, .heal_port = 40002, .ballot = {}});
  Result<FtWorkerLine> voted = ParseFtWorkerLine("sync 0 7 1 65535 3/7/0");
  REQUIRE(voted.ok());
  CHECK(std::get<FtSyncLine>(*voted).ballot == FtWorkerBallot{.quorum_id = 3, .step = 7, .ok = false});
  Result<FtWorkerLine> late = ParseFtWorkerLine("sync 0 7 1 65535 3/7/2");  // no, and it came late
  REQUIRE(late.ok());
  CHECK(std::get<FtSyncLine>(*late).ballot ==
        FtWorkerBallot{.quorum_id = 3, .step = 7, .ok = false, .late = true});
}

TEST_CASE("a healed line", "[ft][lines]") {
  Result<FtWorkerLine> line = ParseFtWorkerLine("healed 0 12 127.0.0.1:4000 1048576 0.25");
  REQUIRE(line.ok());
  const auto& h = std::get<FtHealedLine>(*line);
  CHECK(h.step == 12);
  CHECK(h.source == "127.0.0.1:4000");
  CHECK(h.bytes == 1048576);
  CHECK(h.seconds == 0.25);
}

TEST_CASE("a done line", "[ft][lines]") {
  Result<FtWorkerLine> line = ParseFtWorkerLine("done 3 14");
  REQUIRE(line.ok());
  CHECK(std::get<FtDoneLine>(*line) == FtDoneLine{.local_rank = 3, .step = 14});
  CHECK_THAT(ParseFtWorkerLine("done 3").status().message(), Catch::Contains("takes 2 fields"));
  CHECK_THAT(ParseFtWorkerLine("done x 1").status().message(), Catch::Contains("bad local rank"));
  CHECK_THAT(ParseFtWorkerLine("done 1 -2").status().message(), Catch::Contains("bad step"));
  CHECK(FormatFtFinished(14) == "finished 14\n");
}

TEST_CASE("bad worker lines are one-line errors naming the field", "[ft][lines]") {
  const std::pair<std::string, std::string> cases[] = {
      {"", "unknown word"},
      {"hello", "unknown word 'hello'"},
      {"sync 0 0 1 2", "takes 5 fields"},
      {"sync -1 0 1 2 -", "bad local rank"},
      {"sync 0 x 1 2 -", "bad committed step"},
      {"sync 0 0 0 2 -", "bad ring port"},
      {"sync 0 0 1 70000 -", "bad heal port"},
      {"sync 0 0 1 2 1/2", "bad ballot"},
      {"sync 0 0 1 2 0/2/1", "bad ballot"},
      {"sync 0 0 1 2 1/2/yes", "bad ballot"},
      {"sync 0 0 1 2 1/2/3", "bad ballot"},
      {"healed 0 1 h:1 -5 0.1", "bad byte count"},
      {"healed 0 1 h:1 5 nan", "bad seconds"},
      {"sync 0 0 1 2 \x1b[31m", "bad ballot"},
      {std::string(5000, 'a'), "longer than 4096"},
  };
  for (const auto& [line, want] : cases) {
    INFO(line.substr(0, 40));
    Result<FtWorkerLine> r = ParseFtWorkerLine(line);
    REQUIRE(r.status().IsInvalidArgument());
    CHECK_THAT(r.status().message(), Catch::Contains(want));
    CHECK(r.status().message().find('\n') == std::string::npos);
    CHECK(r.status().message().find('\x1b') == std::string::npos);
  }
}

TEST_CASE("the agent's lines", "[ft][lines]") {
  FtRankAnswer a{.commit = true, .quorum_id = 4, .replica_rank = 1, .replica_world = 3, .max_step = 9,
                 .right = "10.0.0.2:5000", .heal = {}, .serve = true};
  CHECK(FormatFtQuorum(a) == "quorum 1 4 1 3 9 10.0.0.2:5000 - 1\n");
  a.commit.reset();
  a.right.clear();
  a.heal = {"h1:1", "h2:2"};
  a.serve = false;
  CHECK(FormatFtQuorum(a) == "quorum - 4 1 3 9 - h1:1,h2:2 0\n");
  CHECK(FormatFtAbort("group g\nlost") == "abort group g lost\n");
  const std::string long_error = FormatFtError(std::string(10000, 'x'));
  CHECK(long_error.size() <= kFtMaxLine);
  CHECK(long_error.back() == '\n');
}

}  // namespace
}  // namespace ctrun::launcher
