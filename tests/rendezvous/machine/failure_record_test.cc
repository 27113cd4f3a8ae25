// FailureRecord and CheckFailureReport (rendezvous/machine/failure_record.h):
// the bounds of one report, and what a run keeps of many.
#include "rendezvous/machine/failure_record.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <limits>

namespace ctrun::rdzv {
namespace {

WorkerFailureInfo RecordedFailure(int rank, double at) {
  WorkerFailureInfo f;
  f.rank = rank;
  f.local_rank = rank % 2;
  f.exit_code = 1;
  f.failed_at_unix_s = at;
  return f;
}

const NodeId kReportingNode{"host-a", 10, 0};
const TimePoint kReceivedAt{};

TEST_CASE("failure report: texts at their bounds pass, one byte more is one line naming the field") {
  WorkerFailureInfo f = RecordedFailure(4, 100);
  f.error_message = std::string(kMaxFailureText, 'm');
  f.last_line = std::string(kMaxFailureText, 'l');
  f.stacks_file = std::string(kMaxFailurePath, 's');
  f.error_file = std::string(kMaxFailurePath, 'e');
  CHECK(CheckFailureReport(std::string(kMaxFailureHost, 'h'), {f}).ok());

  Status s = CheckFailureReport(std::string(kMaxFailureHost + 1, 'h'), {f});
  CHECK(s.IsInvalidArgument());
  CHECK(s.message() == "failure report: host is 257 bytes, more than 256: send the node's host name");

  WorkerFailureInfo g = f;
  g.error_message += "x";
  s = CheckFailureReport("h", {RecordedFailure(0, 1), g});
  CHECK(s.message() ==
        "failure report: failures[1].error_message is 1025 bytes, more than 1024: send its first line, cut");
  g = f;
  g.last_line += "x";
  CHECK(CheckFailureReport("h", {g}).message().rfind("failure report: failures[0].last_line is 1025 bytes", 0) == 0);
  g = f;
  g.stacks_file += "x";
  CHECK(CheckFailureReport("h", {g}).message().rfind("failure report: failures[0].stacks_file is 4097 bytes", 0) ==
        0);
  g = f;
  g.error_file += "x";
  CHECK(CheckFailureReport("h", {g}).message().rfind("failure report: failures[0].error_file is 4097 bytes", 0) == 0);
}

TEST_CASE("failure report: too many workers, negative ranks, odd signals and times are refused") {
  std::vector<WorkerFailureInfo> many(kMaxFailuresPerReport, RecordedFailure(0, 1));
  CHECK(CheckFailureReport("h", many).ok());
  many.push_back(RecordedFailure(0, 1));
  CHECK(CheckFailureReport("h", many).message() ==
        "failure report: failures holds 65 workers, more than 64: send the rest in another report");

  WorkerFailureInfo f = RecordedFailure(-1, 1);
  CHECK(CheckFailureReport("h", {f}).message() ==
        "failure report: failures[0] has rank -1, local rank -1: ranks are not negative");
  f = RecordedFailure(1, 1);
  f.signal = 200;
  CHECK(CheckFailureReport("h", {f}).message() ==
        "failure report: failures[0].signal 200 is not a signal number in [0, 128)");
  for (double at : {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    f = RecordedFailure(1, at);
    CHECK(CheckFailureReport("h", {f}).message().rfind("failure report: failures[0].failed_at_unix_s ", 0) == 0);
  }
}

TEST_CASE("failure record: kept earliest failure first, ties by rank, with ages; seen counts all") {
  FailureRecord record;
  record.Add(kReportingNode, "host-a", 1, {RecordedFailure(3, 20), RecordedFailure(1, 10)}, kReceivedAt);
  record.Add(NodeId{"host-b", 11, 0}, "host-b", 1, {RecordedFailure(0, 10), RecordedFailure(2, 5)}, kReceivedAt + std::chrono::seconds(2));
  const std::vector<ReportedFailure> kept = record.Kept(kReceivedAt + std::chrono::seconds(5));
  REQUIRE(kept.size() == 4);
  CHECK(kept[0].failure.rank == 2);
  CHECK(kept[1].failure.rank == 0);
  CHECK(kept[2].failure.rank == 1);
  CHECK(kept[3].failure.rank == 3);
  CHECK(kept[0].host == "host-b");
  CHECK(kept[0].received_age_s == Approx(3));
  CHECK(kept[3].received_age_s == Approx(5));
  CHECK(kept[3].round == 1);
  CHECK(record.seen() == 4);
}

TEST_CASE("failure record: keeps the 32 earliest and the 32 newest of many, and counts them all") {
  FailureRecord record;
  // 100 reports arriving in order, each failing later than the one before,
  // then one early failure arriving last.
  for (int i = 0; i < 100; ++i) record.Add(kReportingNode, "h", 1, {RecordedFailure(i, 1000 + i)}, kReceivedAt);
  record.Add(kReportingNode, "h", 2, {RecordedFailure(500, 1)}, kReceivedAt);
  const std::vector<ReportedFailure> kept = record.Kept(kReceivedAt);
  REQUIRE(kept.size() == kKeptEarliestFailures + kKeptNewestFailures);
  CHECK(record.seen() == 101);
  CHECK(kept[0].failure.rank == 500);  // the earliest, though it came last
  for (size_t i = 1; i < kKeptEarliestFailures; ++i) CHECK(kept[i].failure.rank == static_cast<int>(i - 1));
  // The newest by arrival: ranks 69..99 (and rank 500, kept already).
  CHECK(kept[kKeptEarliestFailures].failure.rank == 68);
  CHECK(kept.back().failure.rank == 99);
}

TEST_CASE("failure report: the evidence is bounded, and a report cannot claim a node's loss") {
  WorkerFailureInfo f = RecordedFailure(2, 100);
  f.hang_frame = std::string(kMaxFailureText, 'f');
  f.oom_kills_before = -1;
  f.oom_kills_after = 3;
  f.runtime_s = 0.5;
  f.max_rss_kib = 1 << 20;
  CHECK(CheckFailureReport("h", {f}).ok());
  f.hang_frame += 'f';
  CHECK(CheckFailureReport("h", {f}).message() ==
        "failure report: failures[0].hang_frame is 1025 bytes, more than 1024: send the frame, cut");
  f.hang_frame.clear();
  f.oom_kills_before = -2;
  CHECK(CheckFailureReport("h", {f}).message() ==
        "failure report: failures[0] has an oom_kill count below -1: send the count, or -1 when unreadable");
  f.oom_kills_before = 0;
  f.runtime_s = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(CheckFailureReport("h", {f}).ok());
  f.runtime_s = 1;
  f.max_rss_kib = -1;
  CHECK_FALSE(CheckFailureReport("h", {f}).ok());
  f.max_rss_kib = 0;
  f.node_lost = true;
  CHECK(CheckFailureReport("h", {f}).message() ==
        "failure report: failures[0] says node_lost or unhealthy: only the server records a node's loss; report the "
        "workers' exits");
  f.node_lost = false;
  f.unhealthy = true;
  CHECK_FALSE(CheckFailureReport("h", {f}).ok());
}

TEST_CASE("failure record: a node the server saw go is kept as a record of rank -1") {
  FailureRecord record;
  record.Add(kReportingNode, "host-a", 2, {RecordedFailure(1, 101)}, kReceivedAt);
  record.AddNode(NodeId{"10.0.0.2", 77, 0}, 2, /*lost=*/true, "its connection dropped", 100.5, kReceivedAt);
  record.AddNode(NodeId{"10.0.0.3", 78, 0}, 2, /*lost=*/false, std::string(2000, 'x'), 102, kReceivedAt);
  const std::vector<ReportedFailure> kept = record.Kept(kReceivedAt);
  REQUIRE(kept.size() == 3);
  CHECK(kept[0].failure.rank == -1);
  CHECK(kept[0].failure.node_lost);
  CHECK_FALSE(kept[0].failure.unhealthy);
  CHECK(kept[0].failure.error_message == "its connection dropped");
  CHECK(kept[0].host == "10.0.0.2");
  CHECK(kept[0].round == 2);
  CHECK(kept[1].failure.rank == 1);
  CHECK(kept[2].failure.unhealthy);
  CHECK(kept[2].failure.error_message.size() == kMaxFailureText);
  CHECK(record.seen() == 3);
}

}  // namespace
}  // namespace ctrun::rdzv
