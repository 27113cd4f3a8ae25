// RunHistory: the rounds and restarts of a real machine's decisions, and its bounds.
#include "rendezvous/metrics/run_history.h"

#include <catch2/catch.hpp>

#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

// Steps a Join of `name` and records what it decided at the script's time.
void HistoryJoin(Script& s, RunHistory& h, const std::string& name) {
  s.Join(name);
  h.Add(s.last(), s.At(s.Elapsed()));
}

TEST_CASE("RunHistory records each round, the restart that broke it and its cause") {
  Script s(Nodes(2, 2));
  RunHistory h;
  HistoryJoin(s, h, "a");
  s.Jump(seconds(1));
  HistoryJoin(s, h, "b");  // round 0 completes at 1 s
  REQUIRE(h.rounds().size() == 1);
  CHECK(h.rounds()[0].round == 0);
  CHECK(h.rounds()[0].world_size == 2);
  CHECK(h.rounds()[0].members.size() == 2);
  CHECK(h.rounds()[0].started == s.At(seconds(1)));
  CHECK(h.rounds()[0].end == RoundEnd::kRunning);
  CHECK_FALSE(h.rounds()[0].ended);
  CHECK(h.restarts().empty());

  s.Jump(seconds(4));
  s.Leave("b", LeaveReason::kFailure);  // b's workers failed: the round breaks at 5 s
  h.Add(s.last(), s.At(s.Elapsed()));
  REQUIRE(h.restarts().size() == 1);
  const RestartRecord& r = h.restarts()[0];
  CHECK(r.round == 0);
  CHECK(r.reason == RestartReason::kWorkersFailed);
  CHECK(r.cause == N("b"));
  CHECK(r.nodes == std::vector<NodeId>{N("a")});
  CHECK(r.at == s.At(seconds(5)));
  CHECK(h.rounds()[0].end == RoundEnd::kRestarted);
  CHECK(h.rounds()[0].ended == s.At(seconds(5)));

  HistoryJoin(s, h, "b");
  HistoryJoin(s, h, "a");  // round 1
  REQUIRE(h.rounds().size() == 2);
  CHECK(h.rounds()[1].round == 1);
  CHECK(h.rounds()[1].end == RoundEnd::kRunning);
  s.Close();
  h.Add(s.last(), s.At(s.Elapsed()));
  CHECK(h.rounds()[1].end == RoundEnd::kClosed);
  CHECK(h.rounds()[0].end == RoundEnd::kRestarted);  // unchanged
  CHECK(h.rounds_total() == 2);
  CHECK(h.restarts_total() == 1);
  CHECK(Name(RoundEnd::kClosed) == "closed");
  CHECK(CauseName(RestartReason::kNodeJoinedWaitList) == "node_joined");  // as in ctrun_restarts_total{cause}
  CHECK(CauseName(RestartReason::kNodeLost) == "node_lost");
  CHECK(CauseName(RestartReason::kNodeLeft) == "node_left");
  CHECK(CauseName(RestartReason::kWorkersFailed) == "workers_failed");
}

TEST_CASE("RunHistory: a Close while a round forms ends nothing, a node lost is its own cause") {
  RunHistory h;
  const TimePoint t0{};
  const Member a{N("a"), 0, 1, "", 0}, b{N("b"), 1, 1, "", 0};
  h.Add({RoundComplete{0, {a, b}, 2, false, ""}}, t0);
  h.Add({Evicted{N("b"), "gone"}, RestartRequested{0, RestartReason::kNodeLost, N("b"), {N("a")}}}, t0 + seconds(3));
  CHECK(h.restarts().back().reason == RestartReason::kNodeLost);
  CHECK(h.rounds().back().end == RoundEnd::kRestarted);
  h.Add({Closed{1, {N("a")}}}, t0 + seconds(4));  // round 1 never formed
  CHECK(h.rounds().back().end == RoundEnd::kRestarted);
  CHECK(h.rounds().back().ended == t0 + seconds(3));
}

TEST_CASE("RunHistory keeps only the newest rounds and restarts, and counts them all") {
  RunHistory h;
  const TimePoint t0{};
  const Member a{N("a"), 0, 1, "", 0};
  const uint64_t n = RunHistory::kMaxRounds + 5;
  for (uint64_t round = 0; round < n; ++round) {
    h.Add({RoundComplete{round, {a}, 1, false, ""},
           RestartRequested{round, RestartReason::kNodeJoinedWaitList, N("x"), {N("a")}}},
          t0 + seconds(round));
  }
  CHECK(h.rounds().size() == RunHistory::kMaxRounds);
  CHECK(h.restarts().size() == RunHistory::kMaxRestarts);
  CHECK(h.rounds().front().round == n - RunHistory::kMaxRounds);
  CHECK(h.rounds().back().round == n - 1);
  CHECK(h.restarts().back().round == n - 1);
  CHECK(h.rounds_total() == n);
  CHECK(h.restarts_total() == n);
}

}  // namespace
}  // namespace ctrun::rdzv::testing
