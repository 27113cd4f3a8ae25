// The verdict on a failed job (rendezvous/machine/failure_verdict.h): the
// root cause, each consequence's reason, their groups.
#include "rendezvous/machine/failure_verdict.h"

#include <catch2/catch.hpp>

namespace ctrun::rdzv {
namespace {

ReportedFailure VerdictFailure(const std::string& host, int rank, double at, const std::string& message = "",
                  bool stopped = false) {
  ReportedFailure r;
  r.node = NodeId{host, 1, 0};
  r.host = host;
  r.failure.rank = rank;
  r.failure.exit_code = 1;
  r.failure.failed_at_unix_s = at;
  r.failure.error_message = message;
  r.failure.stopped_by_agent = stopped;
  return r;
}

TEST_CASE("verdict: the earliest failure is the root cause; the others are consequences with reasons") {
  const std::vector<ReportedFailure> failures = {
      VerdictFailure("a", 0, 100.4, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer"),
      VerdictFailure("a", 1, 100.5, "RuntimeError: Connection reset by peer"),
      VerdictFailure("c", 4, 100.0, "ValueError: bad batch"),
      VerdictFailure("c", 5, 100.1, "", /*stopped=*/true),
      VerdictFailure("b", 2, 100.9, "KeyError: 'x'"),
      VerdictFailure("b", 3, 101.0, "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error"),
  };
  const FailureVerdict v = DecideVerdict(failures);
  REQUIRE(v.root == 2u);
  REQUIRE(v.consequences.size() == 5);
  CHECK(v.consequences[0].index == 0);
  CHECK(v.consequences[0].reason == ConsequenceReason::kConnectionError);
  CHECK(v.consequences[0].after_s == Approx(0.4));
  CHECK(v.consequences[1].reason == ConsequenceReason::kConnectionError);
  CHECK(v.consequences[2].reason == ConsequenceReason::kStoppedByAgent);
  CHECK(v.consequences[3].reason == ConsequenceReason::kFailedAfter);
  CHECK(v.consequences[4].reason == ConsequenceReason::kConnectionError);

  const std::vector<ConsequenceGroup> groups = GroupConsequences(v, failures);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].reason == ConsequenceReason::kConnectionError);
  CHECK(groups[0].ranks == std::vector<int>{0, 1, 3});
  CHECK(groups[0].nodes == 2);
  CHECK(groups[0].min_after_s == Approx(0.4));
  CHECK(groups[0].max_after_s == Approx(1.0));
  CHECK(groups[1].reason == ConsequenceReason::kFailedAfter);
  CHECK(groups[1].ranks == std::vector<int>{2});
  CHECK(groups[2].reason == ConsequenceReason::kStoppedByAgent);
  CHECK(groups[2].ranks == std::vector<int>{5});
  CHECK(groups[2].nodes == 1);
}

TEST_CASE("verdict: a failure its agent stopped is never the root cause, however early") {
  const std::vector<ReportedFailure> failures = {VerdictFailure("a", 0, 50, "", true), VerdictFailure("b", 3, 60, "OSError: disk full")};
  const FailureVerdict v = DecideVerdict(failures);
  REQUIRE(v.root == 1u);
  REQUIRE(v.consequences.size() == 1);
  CHECK(v.consequences[0].reason == ConsequenceReason::kStoppedByAgent);
  CHECK(v.consequences[0].after_s == 0);  // never negative
}

TEST_CASE("verdict: ties go to a failure that is not a connection error, then to the lowest rank") {
  CHECK(DecideVerdict({VerdictFailure("a", 0, 7, "Connection reset by peer"), VerdictFailure("b", 4, 7, "ValueError")}).root == 1u);
  CHECK(DecideVerdict({VerdictFailure("a", 6, 7, "ValueError"), VerdictFailure("b", 4, 7, "TypeError")}).root == 1u);
  CHECK(DecideVerdict({VerdictFailure("a", 6, 7, "x"), VerdictFailure("b", 4, 7.5, "y")}).root == 0u);
}

TEST_CASE("verdict: a connection error seen just before the failure that caused it is not the root cause") {
  // No error files: times are when the agents saw the exits, and the peer
  // that raised is seen after the rank whose connection it closed.
  const std::vector<ReportedFailure> seen = {VerdictFailure("a", 0, 100.02, "RuntimeError: Connection closed by peer"),
                                             VerdictFailure("b", 3, 100.05, "ValueError: rank 3 failed")};
  const FailureVerdict v = DecideVerdict(seen);
  REQUIRE(v.root == 1u);
  REQUIRE(v.consequences.size() == 1);
  CHECK(v.consequences[0].reason == ConsequenceReason::kConnectionError);
  CHECK(v.consequences[0].after_s == 0);  // never negative
  // A connection error is never the root while another cause exists,
  // however much earlier it was.
  CHECK(DecideVerdict({VerdictFailure("a", 0, 90, "Connection reset by peer"), VerdictFailure("b", 3, 100, "ValueError")})
            .root == 1u);
  // Only connection errors: the earliest, with the grace, is the root.
  CHECK(DecideVerdict({VerdictFailure("a", 0, 90.5, "Connection reset by peer"),
                       VerdictFailure("b", 3, 90, "RuntimeError: Connection closed by peer")})
            .root == 1u);
}

TEST_CASE("verdict: none reported, or all stopped by their agents, leaves no root cause") {
  CHECK_FALSE(DecideVerdict({}).root);
  const FailureVerdict v = DecideVerdict({VerdictFailure("a", 0, 1, "", true), VerdictFailure("a", 1, 2, "", true)});
  CHECK_FALSE(v.root);
  CHECK(v.consequences.size() == 2);
}

TEST_CASE("verdict: connection errors are recognised in the message or in the traceback's last line") {
  for (const char* text : {"Connection reset by peer", "[pair.cc:598] Connection closed by peer [127.0.0.1]:1234",
                           "Broken pipe", "connectFullMesh failed", "NCCL error: unhandled system error",
                           "Socket Timeout", "Wait timeout after 30 ms", "recv failed: ECONNRESET",
                           "DistNetworkError: Connection refused", "operation timed out"}) {
    INFO(text);
    CHECK(IsConnectionError(text));
  }
  for (const char* text : {"ValueError: bad batch", "CUDA out of memory", "", "KeyError: 'step'"}) {
    INFO(text);
    CHECK_FALSE(IsConnectionError(text));
  }
  ReportedFailure r = VerdictFailure("b", 3, 2, "RuntimeError: something");
  r.failure.last_line = "RuntimeError: Connection reset by peer";
  const FailureVerdict v = DecideVerdict({VerdictFailure("a", 0, 1, "ValueError"), r});
  CHECK(v.consequences[0].reason == ConsequenceReason::kConnectionError);
}

TEST_CASE("verdict: ranks print as runs") {
  CHECK(CompactRanks({}) == "");
  CHECK(CompactRanks({4}) == "4");
  CHECK(CompactRanks({0, 1, 2, 3}) == "0-3");
  CHECK(CompactRanks({0, 1, 2, 3, 5, 7, 8}) == "0-3, 5, 7-8");
  CHECK(ReasonText(ConsequenceReason::kConnectionError) == "connection error");
  CHECK(ReasonText(ConsequenceReason::kStoppedByAgent) == "stopped by its agent");
  CHECK(ReasonText(ConsequenceReason::kFailedAfter) == "failed after it");
}

}  // namespace
}  // namespace ctrun::rdzv
