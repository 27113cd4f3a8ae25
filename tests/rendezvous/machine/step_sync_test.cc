// StepSync: one call per group per step, carrying its vote and asking for
// the next quorum.
#include "rendezvous/machine/step_sync.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace ctrun::rdzv {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const TimePoint kStepSyncT0{};

QuorumParams StepSyncParams(int min = 1) {
  return QuorumParams{.min_replicas = min, .max_replicas = 8, .join_timeout = seconds(60),
                      .heartbeat_timeout = seconds(5)};
}

SyncCall First(const std::string& group, int64_t step = 0) {
  return SyncCall{.group = group, .committed_step = step, .address = group + ":7", .ballot = std::nullopt};
}

SyncCall Voted(const std::string& group, const Quorum& q, bool ok) {
  return SyncCall{.group = group, .committed_step = q.max_step(), .address = group + ":7",
                  .ballot = Ballot{.quorum_id = q.id, .step = q.max_step(), .ok = ok}};
}

std::vector<std::string> Groups(const std::vector<SyncAnswer>& answers) {
  std::vector<std::string> out;
  for (const auto& a : answers) out.push_back(a.group);
  return out;
}

// a, b, c make their first calls: quorum 1 at step 0.
Quorum Started(StepSync& sync, TimePoint t) {
  for (const char* g : {"a", "b", "c"}) sync.Call(First(g), t);
  auto answers = sync.Tick(t);
  REQUIRE(Groups(answers) == std::vector<std::string>{"a", "b", "c"});
  for (const auto& a : answers) REQUIRE(!a.commit);
  return *answers.front().quorum;
}

TEST_CASE("StepSync: every group votes yes; all commit and train the next step in the same quorum") {
  StepSync sync(StepSyncParams());
  const Quorum q = Started(sync, kStepSyncT0);
  const TimePoint t = kStepSyncT0 + milliseconds(10);
  sync.Call(Voted("a", q, true), t);
  sync.Call(Voted("b", q, true), t);
  CHECK(sync.Tick(t).empty());  // c's vote is missing: nothing decided
  CHECK(sync.Pending() == std::vector<std::string>{"a", "b"});
  sync.Call(Voted("c", q, true), t);
  auto answers = sync.Tick(t);
  REQUIRE(answers.size() == 3);
  for (const auto& a : answers) {
    CHECK(a.commit == std::optional<bool>(true));
    CHECK(a.quorum->id == q.id);
    CHECK(a.quorum->max_step() == 1);
  }
}

TEST_CASE("StepSync: one no discards the step for all, and the next quorum has a new id") {
  StepSync sync(StepSyncParams());
  const Quorum q = Started(sync, kStepSyncT0);
  const TimePoint t = kStepSyncT0 + milliseconds(10);
  sync.Call(Voted("a", q, true), t);
  sync.Call(Voted("b", q, false), t);
  sync.Call(Voted("c", q, true), t);
  auto answers = sync.Tick(t);
  REQUIRE(answers.size() == 3);
  for (const auto& a : answers) {
    CHECK(a.commit == std::optional<bool>(false));
    CHECK(a.quorum->id == q.id + 1);     // communicators rebuilt
    CHECK(a.quorum->max_step() == 0);    // the step is run again
  }
}

TEST_CASE("StepSync: a group lost before it voted discards the step; the others go on without it") {
  StepSync sync(StepSyncParams());
  const Quorum q = Started(sync, kStepSyncT0);
  const TimePoint t = kStepSyncT0 + milliseconds(10);
  sync.Call(Voted("a", q, true), t);
  sync.Call(Voted("c", q, true), t);
  sync.Lost("b", t);
  auto answers = sync.Tick(t);
  REQUIRE(Groups(answers) == std::vector<std::string>{"a", "c"});
  for (const auto& a : answers) {
    CHECK(a.commit == std::optional<bool>(false));
    CHECK(a.quorum->members.size() == 2);
    CHECK(a.quorum->max_step() == 0);
  }
}

TEST_CASE("StepSync: a restarted group joins without a ballot, behind, and is told to heal by the step") {
  StepSync sync(StepSyncParams());
  Quorum q = Started(sync, kStepSyncT0);
  TimePoint t = kStepSyncT0;
  for (int step = 0; step < 3; ++step) {  // three committed steps
    t += milliseconds(10);
    for (const char* g : {"a", "b", "c"}) sync.Call(Voted(g, q, true), t);
    auto answers = sync.Tick(t);
    REQUIRE(answers.size() == 3);
    q = *answers.front().quorum;
  }
  CHECK(q.max_step() == 3);
  t += milliseconds(10);
  sync.Lost("c", t);  // c dies while training step 3
  sync.Call(Voted("a", q, true), t);
  sync.Call(Voted("b", q, true), t);
  auto shrunk = sync.Tick(t);
  REQUIRE(Groups(shrunk) == std::vector<std::string>{"a", "b"});
  CHECK(shrunk.front().commit == std::optional<bool>(false));  // c was lost before it voted on step 3
  q = *shrunk.front().quorum;
  t += milliseconds(10);
  sync.Call(First("c", 0), t);  // c restarted with nothing
  sync.Call(Voted("a", q, true), t);
  sync.Call(Voted("b", q, true), t);
  auto grown = sync.Tick(t);
  REQUIRE(Groups(grown) == std::vector<std::string>{"a", "b", "c"});
  CHECK(grown.back().commit == std::nullopt);
  CHECK(grown.back().quorum->id == q.id + 1);
  const size_t c = *grown.back().quorum->rank_of("c");
  CHECK(grown.back().quorum->members[c].step == 0);
  CHECK(grown.back().quorum->max_step() == q.max_step() + 1);
}

TEST_CASE("StepSync: a ballot for a quorum that is gone is not counted") {
  StepSync sync(StepSyncParams());
  const Quorum q = Started(sync, kStepSyncT0);
  const TimePoint t = kStepSyncT0 + milliseconds(10);
  SyncCall stale = Voted("a", q, true);
  stale.ballot->quorum_id = q.id - 1;
  sync.Call(stale, t);
  sync.Call(Voted("b", q, true), t);
  sync.Call(Voted("c", q, true), t);
  CHECK(sync.Tick(t).empty());  // a's vote is still missing
  sync.Lost("a", t);
  auto answers = sync.Tick(t);
  REQUIRE(Groups(answers) == std::vector<std::string>{"b", "c"});
  CHECK(answers.front().commit == std::optional<bool>(false));
}

// `steps` steady steps of 100 ms by a, b, c from quorum q; the last quorum.
Quorum Steady(StepSync& sync, Quorum q, TimePoint& t, int steps) {
  for (int step = 0; step < steps; ++step) {
    t += milliseconds(100);
    for (const char* g : {"a", "b", "c"}) sync.Call(Voted(g, q, true), t);
    auto answers = sync.Tick(t);
    REQUIRE(answers.size() == 3);
    q = *answers.front().quorum;
  }
  return q;
}

// A no from a group that came late to the step's all-reduce (`2`).
SyncCall Late(const std::string& group, const Quorum& q) {
  SyncCall call = Voted(group, q, false);
  call.ballot->late = true;
  return call;
}

TEST_CASE("StepSync: no hang time until the pace is known, then half the median step") {
  StepSync sync(StepSyncParams());
  CHECK(sync.HangTime() == Duration::max());
  TimePoint t = kStepSyncT0;
  Quorum q = Started(sync, t);
  CHECK(!sync.Pace());
  q = Steady(sync, q, t, static_cast<int>(kPaceSteps / 4) - 1);
  CHECK(sync.HangTime() == Duration::max());  // too few steps timed yet
  q = Steady(sync, q, t, static_cast<int>(kPaceSteps));
  REQUIRE(sync.Pace() == Duration(milliseconds(100)));
  CHECK(sync.HangTime() == kMinHangTime);  // half of 100 ms is below the floor
}

TEST_CASE("StepSync: a group that does not call within the hang time of the first ballot is excused and benched; the others commit without it") {
  StepSync sync(StepSyncParams());
  TimePoint t = kStepSyncT0;
  Quorum q = Steady(sync, Started(sync, t), t, 1 + static_cast<int>(kPaceSteps));
  t += milliseconds(100);
  sync.Call(Voted("a", q, true), t);  // c is stopped between its all-reduce and its vote
  sync.Call(Voted("b", q, true), t);
  CHECK(sync.Tick(t).empty());
  CHECK(sync.NextDeadline(t) == t + sync.HangTime());
  CHECK(sync.Tick(t + sync.HangTime() - milliseconds(1)).empty());
  t += sync.HangTime();
  auto answers = sync.Tick(t);
  REQUIRE(Groups(answers) == std::vector<std::string>{"a", "b"});
  for (const auto& a : answers) {
    CHECK(a.commit == std::optional<bool>(true));  // their ring completed: they commit without c
    CHECK(a.quorum->members.size() == 2);
    CHECK(a.quorum->max_step() == q.max_step() + 1);
  }
  CHECK(sync.reason().find("held back for being late") != std::string::npos);
  const std::vector<std::string> notes = sync.TakeNotes();
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "replica group c held up step " + std::to_string(q.max_step()) +
                        " (it did not vote within 100 ms of the first vote): the others go on without it; "
                        "it may rejoin in 1000 ms");
  CHECK(sync.TakeNotes().empty());
  const Quorum shrunk = *answers.front().quorum;
  // c comes back long after its bench: its ballot is for a quorum that is
  // gone; it joins the next quorum behind, to heal.
  t += seconds(30);
  sync.Call(Voted("c", q, true), t);
  sync.Call(Voted("a", shrunk, true), t);
  sync.Call(Voted("b", shrunk, true), t);
  auto grown = sync.Tick(t);
  REQUIRE(Groups(grown) == std::vector<std::string>{"a", "b", "c"});
  CHECK(grown.back().commit == std::nullopt);
  CHECK(grown.back().quorum->members[2].step == q.max_step());
  CHECK(grown.back().quorum->max_step() == q.max_step() + 2);
}

TEST_CASE("StepSync: a group lost before it voted is not benched: restarted, it joins the next quorum at once") {
  StepSync sync(StepSyncParams());
  TimePoint t = kStepSyncT0;
  Quorum q = Steady(sync, Started(sync, t), t, 1 + static_cast<int>(kPaceSteps));
  t += milliseconds(100);
  sync.Lost("c", t);  // its worker died; its agent restarts the group
  sync.Call(Voted("a", q, false), t);  // its ring broke
  CHECK(sync.Tick(t).empty());  // b is still busy (healing, say)
  t += sync.HangTime();
  sync.Call(First("c"), t);  // c's restarted workers ask at once
  auto answers = sync.Tick(t);
  const std::vector<std::string> notes = sync.TakeNotes();
  REQUIRE(notes.size() == 1);  // b held the step up; c was gone, not late
  CHECK(notes[0].find("replica group b held up") == 0);
  REQUIRE(Groups(answers) == std::vector<std::string>{"a", "c"});
  CHECK(answers.front().commit == std::optional<bool>(false));
  CHECK(answers.back().quorum->max_step() == q.max_step());  // c heals to it
}

TEST_CASE("StepSync: a stopped group's agent still heartbeats, but the next quorum does not wait for it") {
  StepSync sync(StepSyncParams());
  TimePoint t = kStepSyncT0;
  Quorum q = Steady(sync, Started(sync, t), t, 1 + static_cast<int>(kPaceSteps));
  t += milliseconds(300);  // a and b waited in the ring for c, then gave up
  sync.Call(Voted("a", q, false), t);
  sync.Call(Voted("b", q, false), t);
  CHECK(sync.Tick(t).empty());
  sync.Heartbeat("c", t + milliseconds(50));  // its watch is open
  t += sync.HangTime();
  sync.Heartbeat("c", t);
  auto answers = sync.Tick(t);
  REQUIRE(Groups(answers) == std::vector<std::string>{"a", "b"});
  CHECK(answers.front().commit == std::optional<bool>(false));
  CHECK(answers.front().quorum->id == q.id + 1);
  CHECK(answers.front().quorum->max_step() == q.max_step());  // the step runs again, without c
}

TEST_CASE("StepSync: a group that came late is benched, longer each time it stays slow") {
  StepSync sync(StepSyncParams());
  TimePoint t = kStepSyncT0;
  Quorum q = Steady(sync, Started(sync, t), t, 1 + static_cast<int>(kPaceSteps));
  Duration bench = std::max<Duration>(kMinBench, 10 * *sync.Pace());
  for (int round = 0; round < 3; ++round) {
    // a and b gave up waiting for c; c came to the ring after them and found it closed.
    t += milliseconds(300);
    sync.Call(Voted("a", q, false), t);
    sync.Call(Voted("b", q, false), t);
    sync.Call(Late("c", q), t + milliseconds(30));
    auto answers = sync.Tick(t + milliseconds(30));
    REQUIRE(Groups(answers) == std::vector<std::string>{"a", "b"});  // c is held back
    CHECK(sync.Pending() == std::vector<std::string>{"c"});
    Quorum two = *answers.front().quorum;
    CHECK(two.members.size() == 2);
    t += milliseconds(30);
    const TimePoint benched_at = t;
    // a and b train on alone until c's bench ends (steps of 100 ms).
    while (t + milliseconds(100) < benched_at + bench) {
      t += milliseconds(100);
      sync.Call(Voted("a", two, true), t);
      sync.Call(Voted("b", two, true), t);
      auto alone = sync.Tick(t);
      REQUIRE(Groups(alone) == std::vector<std::string>{"a", "b"});
      two = *alone.front().quorum;
    }
    t = benched_at + bench;
    sync.Call(Voted("a", two, true), t);
    sync.Call(Voted("b", two, true), t);
    auto back = sync.Tick(t);
    REQUIRE(Groups(back) == std::vector<std::string>{"a", "b", "c"});  // c joins, to heal
    q = *back.front().quorum;
    bench *= 2;
  }
}

TEST_CASE("StepSync: a plain no benches nobody") {
  StepSync sync(StepSyncParams());
  TimePoint t = kStepSyncT0;
  Quorum q = Steady(sync, Started(sync, t), t, 1 + static_cast<int>(kPaceSteps));
  t += milliseconds(100);
  sync.Call(Voted("a", q, true), t);
  sync.Call(Voted("b", q, false), t);
  sync.Call(Voted("c", q, true), t);
  auto answers = sync.Tick(t);
  REQUIRE(answers.size() == 3);
  CHECK(answers.front().commit == std::optional<bool>(false));
}

TEST_CASE("StepSync: a run in progress met fresh waits for its groups to come back before its first quorum") {
  StepSync sync(StepSyncParams());
  TimePoint t = kStepSyncT0;
  // ctrund restarted: c was behind (benched before the restart), a and b at step 40.
  sync.Call(First("c", 12), t);
  CHECK(sync.Tick(t).empty());  // c alone must not train steps 12.. again
  CHECK(sync.NextDeadline(t) == t + kResumeGrace);
  sync.Call(First("a", 40), t + milliseconds(300));
  sync.Call(First("b", 40), t + milliseconds(900));
  CHECK(sync.Tick(t + milliseconds(900)).empty());
  auto answers = sync.Tick(t + kResumeGrace);
  REQUIRE(Groups(answers) == std::vector<std::string>{"a", "b", "c"});
  CHECK(answers.front().quorum->max_step() == 40);  // c heals to step 40
  // Met fresh again with d stopped (its watch heartbeats, it does not call): not waited for.
  StepSync again(StepSyncParams());
  again.Heartbeat("d", t);
  again.Call(First("a", 40), t);
  again.Heartbeat("d", t + kResumeGrace);
  CHECK(Groups(again.Tick(t + kResumeGrace)) == std::vector<std::string>{"a"});
  // A fresh run (every call at step 0, no ballot) forms at once, as ever.
  StepSync fresh(StepSyncParams());
  fresh.Call(First("a"), t);
  CHECK(Groups(fresh.Tick(t)) == std::vector<std::string>{"a"});
}

TEST_CASE("StepSync: a run in progress met fresh forms once every group of the last quorum called with its ballot") {
  StepSync sync(StepSyncParams());
  TimePoint t = kStepSyncT0;
  // ctrund restarted while quorum 7 (a, b, c: world 3) voted on step 40; d was behind in quorum 5.
  auto ballot = [](const std::string& group, int64_t quorum, int64_t step, int world) {
    return SyncCall{.group = group, .committed_step = step, .address = group + ":7",
                    .ballot = Ballot{.quorum_id = quorum, .step = step, .ok = true, .late = false, .world = world}};
  };
  sync.Call(ballot("d", 5, 12, 4), t);
  sync.Call(ballot("a", 7, 40, 3), t + milliseconds(10));
  sync.Call(ballot("b", 7, 40, 3), t + milliseconds(20));
  CHECK(sync.Tick(t + milliseconds(20)).empty());  // c is not back yet
  sync.Call(ballot("c", 7, 40, 3), t + milliseconds(30));
  auto answers = sync.Tick(t + milliseconds(30));  // not kResumeGrace after d's call
  REQUIRE(Groups(answers) == std::vector<std::string>{"a", "b", "c", "d"});
  // The vote on step 40 was the old server's: the step runs again; d heals to it.
  CHECK(answers.front().quorum->max_step() == 40);
  CHECK(!answers.front().commit);
  // A ballot that does not say its quorum's world leaves the grace as it was.
  StepSync unknown(StepSyncParams());
  unknown.Call(ballot("a", 7, 40, 0), t);
  unknown.Call(ballot("b", 7, 40, 0), t);
  CHECK(unknown.Tick(t + milliseconds(999)).empty());
  CHECK(Groups(unknown.Tick(t + kResumeGrace)) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("StepSync: a newcomer behind does not train alone while the group at a later step is benched") {
  StepSync sync(StepSyncParams());
  TimePoint t = kStepSyncT0;
  Quorum q = Steady(sync, Started(sync, t), t, 1 + static_cast<int>(kPaceSteps));
  const int64_t top = q.max_step();
  t += milliseconds(100);
  sync.Call(Voted("a", q, true), t);  // c is stopped: excused and benched
  sync.Call(Voted("b", q, true), t);
  t += sync.HangTime();
  REQUIRE(sync.Tick(t).size() == 2);
  sync.Lost("a", t);  // then a and b are killed
  sync.Lost("b", t);
  t += milliseconds(100);
  sync.Call(First("d", 0), t);  // a relaunched as d, with nothing
  CHECK(sync.Tick(t).empty());  // c, benched, holds step `top`: d does not start over from 0
  CHECK(sync.reason().find("waiting for replica group c") == 0);
  t += seconds(30);
  sync.Heartbeat("d", t);  // its watch
  sync.Call(Voted("c", q, true), t);  // c comes back; its ballot's quorum is gone
  auto both = sync.Tick(t);
  REQUIRE(Groups(both) == std::vector<std::string>{"c", "d"});
  CHECK(both.front().quorum->max_step() == top);  // d heals from c
}

}  // namespace
}  // namespace ctrun::rdzv
