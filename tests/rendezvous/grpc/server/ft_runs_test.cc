// FtRuns (rendezvous/grpc/server/ft_runs.h): the server's fault-tolerance state as
// pure logic, with made-up call and watch ids and a made-up clock.
#include "rendezvous/grpc/server/ft_runs.h"

#include <catch2/catch.hpp>
#include "tests/rendezvous/grpc/server/ft_runs_test_util.h"

namespace ctrun::rdzv {
namespace {

using std::chrono::seconds;

using test::FtTestParams;
using test::t0;

SyncCall First(const std::string& group, int64_t step = 0) {
  return SyncCall{.group = group, .committed_step = step, .address = group + ":1", .ballot = std::nullopt};
}

SyncCall Vote(const std::string& group, int64_t quorum_id, int64_t step, bool ok) {
  return SyncCall{.group = group, .committed_step = step, .address = group + ":1",
                  .ballot = Ballot{.quorum_id = quorum_id, .step = step, .ok = ok}};
}


TEST_CASE("FtRuns: the first calls form a quorum; a vote commits on the fast path") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Watch("r", FtTestParams(2, 3), "a", 100, t0, out).ok());
  REQUIRE(runs.Watch("r", FtTestParams(2, 3), "b", 101, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(2, 3), First("a"), 1, t0, out).ok());
  CHECK(out.answers.empty());
  REQUIRE(runs.Sync("r", FtTestParams(2, 3), First("b"), 2, t0, out).ok());
  REQUIRE(out.answers.size() == 2);
  CHECK(out.answers[0].first == 1);
  CHECK(out.answers[1].second.quorum->id == 1);
  CHECK(out.answers[1].second.quorum->members.size() == 2);
  out = {};
  // a's step outlasts the heartbeat timeout: its watch keeps it healthy, so
  // b's vote waits for a's instead of a being taken for dead.
  REQUIRE(runs.Sync("r", FtTestParams(2, 3), Vote("b", 1, 0, true), 3, t0 + seconds(10), out).ok());
  CHECK(out.answers.empty());
  runs.TickDue(t0 + seconds(20), out);
  CHECK(out.answers.empty());
  REQUIRE(runs.Sync("r", FtTestParams(2, 3), Vote("a", 1, 0, true), 4, t0 + seconds(30), out).ok());
  REQUIRE(out.answers.size() == 2);
  for (const auto& [id, answer] : out.answers) {
    CHECK(answer.commit == std::optional<bool>(true));
    CHECK(answer.quorum->id == 1);
    CHECK(answer.quorum->max_step() == 1);
  }
}

TEST_CASE("FtRuns: a watch ending loses its group and tells the other watches") {
  FtRuns runs;
  FtOutput out;
  const std::vector<std::string> groups = {"a", "b", "c"};
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(runs.Watch("r", FtTestParams(1, 3), groups[i], 100 + i, t0, out).ok());
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(runs.Sync("r", FtTestParams(1, 3), First(groups[i]), 1 + i, t0, out).ok());
  REQUIRE(out.answers.size() == 3);
  out = {};
  REQUIRE(runs.Sync("r", FtTestParams(1, 3), Vote("a", 1, 0, true), 10, t0, out).ok());
  runs.WatchGone("r", "c", 999, t0, out);  // not c's watch: nothing
  CHECK(out.pushes.empty());
  runs.WatchGone("r", "c", 102, t0, out);
  REQUIRE(out.pushes.size() == 2);
  CHECK(out.pushes[0] == std::pair<uint64_t, FtLostEvent>{100, FtLostEvent{"c", 1, "its agent's watch stream ended"}});
  CHECK(out.pushes[1].first == 101);
  REQUIRE(out.logs.size() == 1);
  CHECK(out.logs[0].find("'c', a member of quorum 1, was lost") != std::string::npos);
  REQUIRE(runs.Sync("r", FtTestParams(1, 3), Vote("b", 1, 0, true), 11, t0, out).ok());
  REQUIRE(out.answers.size() == 2);
  CHECK(out.answers[0].second.commit == std::optional<bool>(false));  // c never voted
  CHECK(out.answers[0].second.quorum->id == 2);
  CHECK(out.answers[0].second.quorum->members.size() == 2);
}

TEST_CASE("FtRuns: a leave ends the held call; replaced calls and watches end") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Watch("r", FtTestParams(2, 2), "a", 100, t0, out).ok());
  REQUIRE(runs.Watch("r", FtTestParams(2, 2), "a", 101, t0, out).ok());
  REQUIRE(out.ended_watches.size() == 1);
  CHECK(out.ended_watches[0].first == 100);
  CHECK(out.ended_watches[0].second.IsAborted());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), First("a"), 1, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), First("a"), 2, t0, out).ok());
  REQUIRE(out.ended_calls.size() == 1);
  CHECK(out.ended_calls[0].first == 1);
  out = {};
  REQUIRE(runs.Leave("r", "a", "its workers\nfailed", t0, out).ok());
  REQUIRE(out.ended_calls.size() == 1);
  CHECK(out.ended_calls[0].second.message().find("its workers failed") != std::string::npos);
  CHECK(out.ended_calls[0].first == 2);
  CHECK(out.ended_calls[0].second.IsAborted());
  CHECK(runs.Leave("unknown", "a", "", t0, out).ok());
}

TEST_CASE("FtRuns: a group that finished ends the run: no push, and a later call is answered finished") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Watch("r", FtTestParams(1, 3), "a", 100, t0, out).ok());
  REQUIRE(runs.Watch("r", FtTestParams(1, 3), "b", 101, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(1, 3), First("a"), 1, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(1, 3), First("b"), 2, t0, out).ok());
  REQUIRE(out.answers.size() == 2);
  out = {};
  REQUIRE(runs.Leave("r", "a", "its workers finished training", t0, out, 14).ok());
  CHECK(out.pushes.empty());  // not a loss: nobody aborts anything
  REQUIRE(runs.Leave("r", "b", "its workers finished training", t0, out, 14).ok());
  CHECK(out.pushes.empty());
  CHECK_THAT(out.logs.front(), Catch::Contains("'a' finished training at step 14"));
  out = {};
  REQUIRE(runs.Sync("r", FtTestParams(1, 3), First("c"), 3, t0, out).ok());  // restarted too late
  REQUIRE(out.answers.size() == 1);
  CHECK(out.answers[0].first == 3);
  CHECK(out.answers[0].second.finished_step == std::optional<int64_t>(14));
  CHECK(out.answers[0].second.quorum->members.empty());
  CHECK(runs.Leave("r", "c", "", t0, out, -1).IsInvalidArgument());
}

TEST_CASE("FtRuns: a dropped call gets no answer") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), First("a"), 1, t0, out).ok());
  runs.DropCall("r", "a", 1);
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), First("b"), 2, t0, out).ok());
  REQUIRE(out.answers.size() == 1);
  CHECK(out.answers[0].first == 2);
}

TEST_CASE("FtRuns: bounds and bad input are refused with one line") {
  FtRuns runs(FtRuns::Limits{.max_runs = 2, .max_groups = 2, .idle_ttl = seconds(60)});
  FtOutput out;
  CHECK(runs.Sync("r", FtTestParams(1, 2), First(std::string(129, 'g')), 1, t0, out).IsInvalidArgument());
  CHECK(runs.Sync("r", FtTestParams(1, 2), First(""), 1, t0, out).IsInvalidArgument());
  SyncCall far = First("a");
  far.address = std::string(1025, 'x');
  CHECK(runs.Sync("r", FtTestParams(1, 2), far, 1, t0, out).IsInvalidArgument());
  CHECK(runs.Sync("", FtTestParams(1, 2), First("a"), 1, t0, out).IsInvalidArgument());
  CHECK(runs.Leave("r", "a", std::string(257, 'x'), t0, out).IsInvalidArgument());
  CHECK(runs.Watch("r", FtTestParams(1, 2), "a\nb", 1, t0, out).IsInvalidArgument());
  Status bad = runs.Watch("r", FtTestParams(0, 2), "a", 1, t0, out);
  CHECK(bad.IsInvalidArgument());
  CHECK(bad.message().find("min_replicas") != std::string::npos);
  CHECK(runs.run_count() == 0);

  REQUIRE(runs.Watch("r", FtTestParams(1, 2), "a", 1, t0, out).ok());
  Status other = runs.Watch("r", FtTestParams(1, 3), "b", 2, t0, out);
  CHECK(other.code() == Status::Code::kFailedPrecondition);
  CHECK(other.message().find("1:2") != std::string::npos);
  CHECK(other.message().find("1:3") != std::string::npos);
  REQUIRE(runs.Watch("r", FtTestParams(1, 2), "b", 3, t0, out).ok());
  Status full = runs.Watch("r", FtTestParams(1, 2), "c", 4, t0, out);
  CHECK(full.code() == Status::Code::kResourceExhausted);
  CHECK(full.message().find("2 replica groups") != std::string::npos);
  runs.WatchGone("r", "b", 3, t0, out);  // b lost: its place is free
  CHECK(runs.Watch("r", FtTestParams(1, 2), "c", 4, t0, out).ok());
  REQUIRE(runs.Leave("r", "c", "its workers failed", t0, out).ok());
  // c still watches
  CHECK(runs.Watch("r", FtTestParams(1, 2), "d", 7, t0, out).code() == Status::Code::kResourceExhausted);
  CHECK(runs.Leave("r", "stranger", "", t0, out).ok());  // nothing kept for it

  REQUIRE(runs.Watch("s", FtTestParams(1, 2), "a", 5, t0, out).ok());
  Status many = runs.Watch("t", FtTestParams(1, 2), "a", 6, t0, out);
  CHECK(many.code() == Status::Code::kResourceExhausted);
  CHECK(many.message().find("2 fault-tolerance runs") != std::string::npos);
}

TEST_CASE("FtRuns: a run with no watch and no held call is forgotten after idle_ttl") {
  FtRuns runs(FtRuns::Limits{.max_runs = 64, .max_groups = 1024, .idle_ttl = seconds(60)});
  FtOutput out;
  REQUIRE(runs.Watch("r", FtTestParams(1, 2), "a", 1, t0, out).ok());
  runs.TickDue(t0 + seconds(600), out);
  CHECK(runs.run_count() == 1);  // a watch is open
  runs.WatchGone("r", "a", 1, t0 + seconds(600), out);
  REQUIRE(runs.NextDeadline().has_value());
  CHECK(*runs.NextDeadline() == t0 + seconds(660));
  runs.TickDue(t0 + seconds(659), out);
  CHECK(runs.run_count() == 1);
  runs.TickDue(t0 + seconds(660), out);
  CHECK(runs.run_count() == 0);
  CHECK_FALSE(runs.NextDeadline().has_value());
}


TEST_CASE("FtRuns: only a step's first loss is pushed; the next step's first is pushed again") {
  FtRuns runs;
  FtOutput out;
  const std::vector<std::string> groups = {"a", "b", "c", "d"};
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(runs.Watch("r", FtTestParams(1, 4), groups[i], 100 + i, t0, out).ok());
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(runs.Sync("r", FtTestParams(1, 4), First(groups[i]), 1 + i, t0, out).ok());
  REQUIRE(out.answers.size() == 4);
  out = {};
  // Quorum 1's step 0 in flight: c then d lost.
  runs.WatchGone("r", "c", 102, t0, out);
  CHECK(out.pushes.size() == 3);
  out = {};
  runs.WatchGone("r", "d", 103, t0, out);
  CHECK(out.pushes.empty());  // a and b abort step 0 already
  REQUIRE(out.logs.size() == 1);
  CHECK_THAT(out.logs[0], Catch::Contains("'d', a member of quorum 1, was lost") &&
                              Catch::Contains("the others were told of an earlier loss in this step"));
  out = {};
  // a and b vote the aborted step down and get quorum 2; its step in flight
  // gets the push of its first loss.
  REQUIRE(runs.Sync("r", FtTestParams(1, 4), Vote("a", 1, 0, false), 10, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(1, 4), Vote("b", 1, 0, false), 11, t0, out).ok());
  REQUIRE(out.answers.size() == 2);
  CHECK(out.answers[0].second.quorum->id == 2);
  out = {};
  runs.WatchGone("r", "b", 101, t0, out);
  REQUIRE(out.pushes.size() == 1);
  CHECK(out.pushes[0] == std::pair<uint64_t, FtLostEvent>{100, FtLostEvent{"b", 2, "its agent's watch stream ended"}});
}

}  // namespace
}  // namespace ctrun::rdzv
