// FtRuns (rendezvous/grpc/server/ft_runs.h) with replica groups of several nodes,
// and FtParts (ft_parts.h), their joined call: pure logic with made-up call
// and watch ids and a made-up clock.
#include <catch2/catch.hpp>

#include "rendezvous/grpc/server/ft_parts.h"
#include "rendezvous/grpc/server/ft_runs.h"
#include "tests/rendezvous/grpc/server/ft_runs_test_util.h"

namespace ctrun::rdzv {
namespace {

using std::chrono::seconds;

using test::FtTestParams;
using test::t0;

// Node `part`'s call for group `group` (address "<group><part>").
SyncCall Call(const std::string& group, int part, int64_t step = 0, std::optional<Ballot> ballot = std::nullopt) {
  return SyncCall{.group = group, .committed_step = step, .address = group + std::to_string(part), .ballot = ballot};
}

Ballot Yes(int64_t quorum_id, int64_t step = 0) { return Ballot{.quorum_id = quorum_id, .step = step, .ok = true}; }


// The ids in `out.answers`, in order.
std::vector<uint64_t> Answered(const FtOutput& out) {
  std::vector<uint64_t> ids;
  for (const auto& [id, answer] : out.answers) ids.push_back(id);
  return ids;
}

TEST_CASE("FtRuns parts: two parts join into one call; the answer fans out; a partly held group waits") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("b", 0), 0, 1, 1, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 1), 1, 2, 11, t0, out).ok());
  CHECK(out.answers.empty());
  std::optional<FtRunView> view = runs.View("r");
  REQUIRE(view.has_value());
  CHECK(view->waiting == std::vector<std::string>{"a", "b"});  // a: part 1 of 2 held
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 0), 0, 2, 10, t0, out).ok());
  CHECK(Answered(out) == std::vector<uint64_t>{10, 11, 1});  // by group, then part
  const SyncAnswer& a = out.answers[0].second;
  CHECK(out.answers[1].second == a);
  CHECK(a.group == "a");
  CHECK(a.quorum->id == 1);
  REQUIRE(a.quorum->members.size() == 2);
  CHECK(a.quorum->members[0].id == "a");
  CHECK(a.quorum->members[0].address == "a0;a1");  // in part order, whatever the order of the calls
  CHECK(a.quorum->members[1].address == "b0");
  CHECK(runs.View("r")->waiting.empty());
}

TEST_CASE("FtRuns parts: three parts vote as one; one part without a ballot votes no") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("b", 0), 0, 1, 1, t0, out).ok());
  for (int p = 0; p < 3; ++p) REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", p), p, 3, 10 + p, t0, out).ok());
  REQUIRE(out.answers.size() == 4);
  CHECK(out.answers[1].second.quorum->members[0].address == "a0;a1;a2");
  out = {};
  // Step 0 of quorum 1: a's part 2 lost its ballot (it healed): a says no.
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("b", 0, 0, Yes(1)), 0, 1, 2, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 0, 0, Yes(1)), 0, 3, 20, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 1, 0, Yes(1)), 1, 3, 21, t0, out).ok());
  CHECK(out.answers.empty());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 2, 0), 2, 3, 22, t0, out).ok());
  CHECK(Answered(out) == std::vector<uint64_t>{20, 21, 22, 2});
  for (const auto& [id, answer] : out.answers) {
    CHECK(answer.commit == std::optional<bool>(false));
    CHECK(answer.quorum->id == 2);  // a discarded step: a new quorum id
  }
  out = {};
  // Step 0 of quorum 2: every part says yes: the step commits.
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("b", 0, 0, Yes(2)), 0, 1, 3, t0, out).ok());
  for (int p = 0; p < 3; ++p) {
    REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", p, 0, Yes(2)), p, 3, 30 + p, t0, out).ok());
  }
  REQUIRE(out.answers.size() == 4);
  for (const auto& [id, answer] : out.answers) CHECK(answer.commit == std::optional<bool>(true));
  CHECK(out.answers[0].second.quorum->max_step() == 1);
}

TEST_CASE("FtParts: the joined ballot is a yes only when every part votes yes for the same quorum and step") {
  auto joined = [](std::vector<std::optional<Ballot>> ballots) {
    FtParts parts;
    for (size_t p = 0; p < ballots.size(); ++p) {
      parts.Hold(Call("a", static_cast<int>(p), 4, ballots[p]), static_cast<int64_t>(p),
                 static_cast<int64_t>(ballots.size()), p);
    }
    std::optional<Result<SyncCall>> call = parts.Assemble("a");
    REQUIRE(call.has_value());
    REQUIRE(call->ok());
    return (*call)->ballot;
  };
  CHECK(joined({std::nullopt, std::nullopt}) == std::nullopt);
  CHECK(joined({Yes(3, 4), Yes(3, 4)}) == Yes(3, 4));
  CHECK(joined({Yes(3, 4), std::nullopt}) == Ballot{.quorum_id = 3, .step = 4, .ok = false});
  CHECK(joined({std::nullopt, Yes(3, 4)}) == Ballot{.quorum_id = 3, .step = 4, .ok = false});
  CHECK(joined({Yes(3, 4), Yes(2, 4)}) == Ballot{.quorum_id = 3, .step = 4, .ok = false});
  CHECK(joined({Yes(3, 4), Yes(3, 5)}) == Ballot{.quorum_id = 3, .step = 4, .ok = false});
  CHECK(joined({Yes(3, 4), Ballot{.quorum_id = 3, .step = 4, .ok = false}}) ==
        Ballot{.quorum_id = 3, .step = 4, .ok = false});
  CHECK(joined({Yes(3, 4)}) == Yes(3, 4));  // one part: unchanged
  // A part that came late makes the group's no a late one.
  CHECK(joined({Yes(3, 4), Ballot{.quorum_id = 3, .step = 4, .ok = false, .late = true}}) ==
        Ballot{.quorum_id = 3, .step = 4, .ok = false, .late = true});
  // The quorum's world any part knows.
  CHECK(joined({Ballot{.quorum_id = 3, .step = 4, .ok = true, .late = false, .world = 4}, Yes(3, 4)}) ==
        Ballot{.quorum_id = 3, .step = 4, .ok = true, .late = false, .world = 4});
  FtParts parts;
  parts.Hold(Call("a", 1), 1, 2, 1);
  CHECK_FALSE(parts.Assemble("a").has_value());
  CHECK(parts.Partial() == std::vector<std::string>{"a"});
}

TEST_CASE("FtRuns parts: differing committed steps end every part's call and step nothing") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Sync("r", FtTestParams(1, 2), Call("a", 0, 3), 0, 2, 1, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(1, 2), Call("a", 1, 4), 1, 2, 2, t0, out).ok());
  CHECK(out.answers.empty());
  REQUIRE(out.ended_calls.size() == 2);
  CHECK(out.ended_calls[0].first == 1);
  CHECK(out.ended_calls[1].first == 2);
  for (const auto& [id, why] : out.ended_calls) {
    CHECK(why.IsInvalidArgument());
    CHECK_THAT(why.message(), Catch::Contains("'a'") && Catch::Contains("part 0: 3") && Catch::Contains("part 1: 4"));
  }
  CHECK_FALSE(runs.LastQuorum("r").has_value());
  CHECK(runs.View("r")->waiting.empty());
}

TEST_CASE("FtRuns parts: a part's second call replaces its first; a dropped part gets no answer") {
  FtRuns runs;
  FtOutput out;
  // MIN 3: a's joined call waits for c.
  REQUIRE(runs.Sync("r", FtTestParams(3, 3), Call("a", 0), 0, 2, 1, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(3, 3), Call("a", 0), 0, 2, 2, t0, out).ok());
  REQUIRE(out.ended_calls.size() == 1);
  CHECK(out.ended_calls[0].first == 1);
  CHECK(out.ended_calls[0].second.IsAborted());
  CHECK_THAT(out.ended_calls[0].second.message(), Catch::Contains("replaced"));
  REQUIRE(runs.Sync("r", FtTestParams(3, 3), Call("a", 1), 1, 2, 3, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(3, 3), Call("b", 0), 0, 1, 4, t0, out).ok());
  runs.DropCall("r", "a", 2);  // part 0's client went away after the join
  out = {};
  REQUIRE(runs.Sync("r", FtTestParams(3, 3), Call("c", 0), 0, 1, 5, t0, out).ok());
  CHECK(Answered(out) == std::vector<uint64_t>{3, 4, 5});
  CHECK(out.answers[0].second.quorum->members[0].address == "a0;a1");
}

TEST_CASE("FtRuns parts: a part dropped before the join is waited for again") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 0), 0, 2, 1, t0, out).ok());
  runs.DropCall("r", "a", 1);
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 1), 1, 2, 2, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("b", 0), 0, 1, 3, t0, out).ok());
  CHECK(out.answers.empty());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 0), 0, 2, 4, t0, out).ok());
  CHECK(Answered(out) == std::vector<uint64_t>{4, 2, 3});
}

TEST_CASE("FtRuns parts: a leave while parts are held ends all of them") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 0), 0, 3, 1, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(2, 2), Call("a", 2), 2, 3, 2, t0, out).ok());
  REQUIRE(runs.Leave("r", "a", "its workers failed", t0, out).ok());
  REQUIRE(out.ended_calls.size() == 2);
  for (const auto& [id, why] : out.ended_calls) CHECK(why.IsAborted());
  CHECK(out.ended_calls[0].first == 1);
  CHECK(out.ended_calls[1].first == 2);
  CHECK(runs.View("r")->waiting.empty());
}

TEST_CASE("FtRuns parts: a finished run answers every held part with finished") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Watch("r", FtTestParams(1, 2), "b", 100, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(1, 2), Call("a", 0), 0, 2, 1, t0, out).ok());
  REQUIRE(runs.Leave("r", "b", "its workers finished training", t0, out, 5).ok());
  CHECK(out.answers.empty());
  REQUIRE(runs.Sync("r", FtTestParams(1, 2), Call("a", 1), 1, 2, 2, t0, out).ok());
  CHECK(Answered(out) == std::vector<uint64_t>{1, 2});
  for (const auto& [id, answer] : out.answers) {
    CHECK(answer.finished_step == std::optional<int64_t>(5));
    CHECK(answer.group == "a");
  }
}

TEST_CASE("FtRuns parts: parts out of range, a changed count and a too long joined address are refused") {
  FtRuns runs;
  FtOutput out;
  const QuorumParams params = FtTestParams(2, 2);
  for (int64_t parts : {0, 65, -1}) {
    Status s = runs.Sync("r", params, Call("a", 0), 0, parts, 1, t0, out);
    CHECK(s.IsInvalidArgument());
    CHECK_THAT(s.message(), Catch::Contains("parts " + std::to_string(parts)));
  }
  for (int64_t part : {2, -1}) {
    Status s = runs.Sync("r", params, Call("a", 0), part, 2, 1, t0, out);
    CHECK(s.IsInvalidArgument());
    CHECK_THAT(s.message(), Catch::Contains("part " + std::to_string(part)));
  }
  CHECK(runs.Sync("r", params, Call("a", 63), 63, 64, 1, t0, out).ok());
  CHECK(runs.Leave("r", "a", "", t0, out).ok());  // forgotten: its count too

  REQUIRE(runs.Sync("r", params, Call("a", 0), 0, 2, 2, t0, out).ok());
  Status changed = runs.Sync("r", params, Call("a", 1), 1, 3, 3, t0, out);
  CHECK(changed.code() == Status::Code::kFailedPrecondition);
  CHECK_THAT(changed.message(), Catch::Contains("parts 2") && Catch::Contains("parts 3"));

  SyncCall big = Call("b", 0);
  big.address = std::string(kMaxFtAddressBytes, 'x');
  REQUIRE(runs.Sync("r", params, big, 0, 2, 4, t0, out).ok());
  big.address = std::string(kMaxFtAddressBytes, 'y');
  Status too_long = runs.Sync("r", params, big, 1, 2, 5, t0, out);
  CHECK(too_long.IsInvalidArgument());
  CHECK_THAT(too_long.message(), Catch::Contains("2048") && Catch::Contains("part 1"));
  big.address.pop_back();  // 1024 + ';' + 1023: exactly 2048
  REQUIRE(runs.Sync("r", params, big, 1, 2, 6, t0, out).ok());
  out = {};
  REQUIRE(runs.Sync("r", params, Call("a", 1), 1, 2, 7, t0, out).ok());
  CHECK(Answered(out) == std::vector<uint64_t>{2, 7, 4, 6});
  REQUIRE(out.answers.front().second.quorum->members.size() == 2);
  CHECK(out.answers.front().second.quorum->members[1].address.size() == kMaxFtAssembledAddressBytes);
}

// Groups a and b of nodes n0 and n1, and c of one node: quorum 1.
void FormThree(FtRuns& runs, FtOutput& out) {
  uint64_t id = 100;
  for (const char* g : {"a", "b"}) {
    for (const char* n : {"n0", "n1"}) REQUIRE(runs.Watch("r", FtTestParams(1, 3), g, id++, t0, out, n).ok());
  }
  REQUIRE(runs.Watch("r", FtTestParams(1, 3), "c", 104, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(1, 3), Call("c", 0), 0, 1, 1, t0, out).ok());
  for (int p = 0; p < 2; ++p) {
    REQUIRE(runs.Sync("r", FtTestParams(1, 3), Call("a", p), p, 2, 2 + p, t0, out).ok());
    REQUIRE(runs.Sync("r", FtTestParams(1, 3), Call("b", p), p, 2, 4 + p, t0, out).ok());
  }
  REQUIRE(out.answers.size() == 5);
  REQUIRE(runs.LastQuorum("r")->members.size() == 3);
  out = {};
}

TEST_CASE("FtRuns parts: either node's watch ending loses the group; every node of the others is told") {
  for (uint64_t gone : {100, 101}) {  // a's n0, then a's n1
    FtRuns runs;
    FtOutput out;
    FormThree(runs, out);
    runs.WatchGone("r", "a", gone, t0, out);
    std::vector<uint64_t> told;
    for (const auto& [watch, lost] : out.pushes) {
      told.push_back(watch);
      CHECK(lost == FtLostEvent{"a", 1, "its agent's watch stream ended"});
    }
    CHECK(told == std::vector<uint64_t>{102, 103, 104});
    REQUIRE(out.logs.size() == 1);
    CHECK_THAT(out.logs[0], Catch::Contains("'a', a member of quorum 1, was lost") &&
                                Catch::Contains("told 2 other groups"));
    out = {};
    runs.WatchGone("r", "a", 201 - gone, t0, out);  // its other node's: the group is lost already
    CHECK(out.pushes.empty());
    // b and c go on without a.
    REQUIRE(runs.Sync("r", FtTestParams(1, 3), Call("c", 0, 0, Yes(1)), 0, 1, 10, t0, out).ok());
    REQUIRE(runs.Sync("r", FtTestParams(1, 3), Call("b", 0, 0, Yes(1)), 0, 2, 11, t0, out).ok());
    REQUIRE(runs.Sync("r", FtTestParams(1, 3), Call("b", 1, 0, Yes(1)), 1, 2, 12, t0, out).ok());
    REQUIRE(out.answers.size() == 3);
    CHECK(Answered(out) == std::vector<uint64_t>{11, 12, 10});
    CHECK(out.answers[0].second.commit == std::optional<bool>(false));  // a never voted
    CHECK(out.answers[0].second.quorum->members.size() == 2);
  }
}

TEST_CASE("FtRuns parts: a group has at most one watch per node; a node's second watch replaces its first") {
  FtRuns runs;
  FtOutput out;
  REQUIRE(runs.Sync("r", FtTestParams(1, 2), Call("a", 0), 0, 2, 1, t0, out).ok());
  REQUIRE(runs.Watch("r", FtTestParams(1, 2), "a", 100, t0, out, "n0").ok());
  REQUIRE(runs.Watch("r", FtTestParams(1, 2), "a", 101, t0, out, "n1").ok());
  Status more = runs.Watch("r", FtTestParams(1, 2), "a", 102, t0, out, "n2");
  CHECK(more.code() == Status::Code::kResourceExhausted);
  CHECK_THAT(more.message(), Catch::Contains("2 watches"));
  REQUIRE(runs.Watch("r", FtTestParams(1, 2), "a", 103, t0, out, "n1").ok());
  REQUIRE(out.ended_watches.size() == 1);
  CHECK(out.ended_watches[0].first == 101);
  CHECK(out.ended_watches[0].second.IsAborted());
  CHECK(runs.Watch("r", FtTestParams(1, 2), "a", 104, t0, out, std::string(129, 'n')).IsInvalidArgument());
  CHECK(runs.Watch("r", FtTestParams(1, 2), "a", 104, t0, out, "n\n").IsInvalidArgument());

  // Before the group's first call: at most 64.
  for (uint64_t i = 0; i < 64; ++i) {
    REQUIRE(runs.Watch("r", FtTestParams(1, 2), "b", 200 + i, t0, out, "n" + std::to_string(i)).ok());
  }
  CHECK(runs.Watch("r", FtTestParams(1, 2), "b", 300, t0, out, "n64").code() == Status::Code::kResourceExhausted);
}

TEST_CASE("FtRuns parts: the server holds at most max_held_calls calls, all runs together") {
  FtRuns runs(FtRuns::Limits{.max_runs = 64, .max_groups = 1024, .max_held_calls = 3,
                             .idle_ttl = std::chrono::minutes(5)});
  FtOutput out;
  REQUIRE(runs.Sync("r", FtTestParams(3, 3), Call("a", 0), 0, 2, 1, t0, out).ok());
  REQUIRE(runs.Sync("r", FtTestParams(3, 3), Call("a", 1), 1, 2, 2, t0, out).ok());
  REQUIRE(runs.Sync("s", FtTestParams(2, 2), Call("b", 0), 0, 1, 3, t0, out).ok());
  Status full = runs.Sync("s", FtTestParams(2, 2), Call("c", 0), 0, 1, 4, t0, out);
  CHECK(full.code() == Status::Code::kResourceExhausted);
  CHECK_THAT(full.message(), Catch::Contains("holds 3 calls already"));
  // A part that calls again replaces its own call: no new one is held.
  REQUIRE(runs.Sync("r", FtTestParams(3, 3), Call("a", 1), 1, 2, 5, t0, out).ok());
  REQUIRE(out.ended_calls.size() == 1);
  CHECK(out.ended_calls[0].first == 2);
  // Once a call is answered (dropped here) there is room again.
  runs.DropCall("s", "b", 3);
  CHECK(runs.Sync("s", FtTestParams(2, 2), Call("c", 0), 0, 1, 6, t0, out).ok());
}

}  // namespace
}  // namespace ctrun::rdzv
