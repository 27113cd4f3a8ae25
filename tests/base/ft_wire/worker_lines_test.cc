// The lines a worker sends its agent (base/ft_wire/worker_lines.h): the text
// the worker writes, and the agent's parse of it, refused naming the field.
#include "base/ft_wire/worker_lines.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "base/ft_wire/fields.h"

namespace ctrun::ft_wire {
namespace {

TEST_CASE("sync lines carry the ballot or '-'", "[ft_wire][lines]") {
  SyncLine line{2, 17, 40001, 40002, Ballot{5, 16, true}};
  CHECK(FormatSync(line) == "sync 2 17 40001 40002 5/16/1\n");
  line.ballot = Ballot{5, 16, false};
  CHECK(FormatSync(line) == "sync 2 17 40001 40002 5/16/0\n");
  line.ballot->late = true;  // no, and it came late to the all-reduce
  CHECK(FormatSync(line) == "sync 2 17 40001 40002 5/16/2\n");
  line.ballot.reset();
  CHECK(FormatSync(line) == "sync 2 17 40001 40002 -\n");
}

TEST_CASE("a sync line with and without a ballot", "[ft_wire][lines]") {
  Result<WorkerLine> first = ParseWorkerLine("sync 1 0 40001 40002 -");
  REQUIRE(first.ok());
  CHECK(std::get<SyncLine>(*first) ==
        SyncLine{.local_rank = 1, .committed_step = 0, .ring_port = 40001, .heal_port = 40002, .ballot = {}});
  Result<WorkerLine> voted = ParseWorkerLine("sync 0 7 1 65535 3/7/0");
  REQUIRE(voted.ok());
  CHECK(std::get<SyncLine>(*voted).ballot == Ballot{.quorum_id = 3, .step = 7, .ok = false});
  Result<WorkerLine> late = ParseWorkerLine("sync 0 7 1 65535 3/7/2");  // no, and it came late
  REQUIRE(late.ok());
  CHECK(std::get<SyncLine>(*late).ballot == Ballot{.quorum_id = 3, .step = 7, .ok = false, .late = true});
}

TEST_CASE("a sync line reads back as written", "[ft_wire][lines]") {
  for (const SyncLine& line : {SyncLine{2, 17, 40001, 40002, Ballot{5, 16, true}},
                               SyncLine{0, 0, 1, 65535, Ballot{1, 0, false, true}},
                               SyncLine{3, 9, 7, 8, std::nullopt}}) {
    std::string text = FormatSync(line);
    text.pop_back();  // the '\n'
    Result<WorkerLine> back = ParseWorkerLine(text);
    REQUIRE(back.ok());
    CHECK(std::get<SyncLine>(*back) == line);
  }
}

TEST_CASE("healed lines give seconds to the millisecond", "[ft_wire][lines]") {
  CHECK(FormatHealed(HealedLine{1, 42, "10.0.0.3:5000", 1048576, 1.23456}) ==
        "healed 1 42 10.0.0.3:5000 1048576 1.235\n");
}

TEST_CASE("a healed line", "[ft_wire][lines]") {
  Result<WorkerLine> line = ParseWorkerLine("healed 0 12 127.0.0.1:4000 1048576 0.25");
  REQUIRE(line.ok());
  const auto& h = std::get<HealedLine>(*line);
  CHECK(h.step == 12);
  CHECK(h.source == "127.0.0.1:4000");
  CHECK(h.bytes == 1048576);
  CHECK(h.seconds == 0.25);
}

TEST_CASE("a done line", "[ft_wire][lines]") {
  CHECK(FormatDone(DoneLine{.local_rank = 3, .step = 14}) == "done 3 14\n");
  Result<WorkerLine> line = ParseWorkerLine("done 3 14");
  REQUIRE(line.ok());
  CHECK(std::get<DoneLine>(*line) == DoneLine{.local_rank = 3, .step = 14});
  CHECK_THAT(ParseWorkerLine("done 3").status().message(), Catch::Contains("takes 2 fields"));
  CHECK_THAT(ParseWorkerLine("done x 1").status().message(), Catch::Contains("bad local rank"));
  CHECK_THAT(ParseWorkerLine("done 1 -2").status().message(), Catch::Contains("bad step"));
}

TEST_CASE("bad worker lines are one-line errors naming the field", "[ft_wire][lines]") {
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
    Result<WorkerLine> r = ParseWorkerLine(line);
    REQUIRE(r.status().IsInvalidArgument());
    CHECK_THAT(r.status().message(), Catch::Contains(want));
    CHECK(r.status().message().find('\n') == std::string::npos);
    CHECK(r.status().message().find('\x1b') == std::string::npos);
  }
}

TEST_CASE("a field quoted in an error is cut and made printable", "[ft_wire][lines]") {
  CHECK(QuotePart("a\\b") == "a\\\\b");
  CHECK(QuotePart("\x1b[31m") == "\\x1b[31m");
  CHECK(QuotePart("\xc2\x85") == "\\xc2\\x85");  // NEL, a C1 control
  CHECK(QuotePart("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(QuotePart(std::string(40, 'a')) == std::string(32, 'a') + "\u2026(40 bytes)");
}

}  // namespace
}  // namespace ctrun::ft_wire
