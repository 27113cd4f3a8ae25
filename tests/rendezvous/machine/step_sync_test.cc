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
  return answers.front().quorum;
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
    CHECK(a.quorum.id == q.id);
    CHECK(a.quorum.max_step() == 1);
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
    CHECK(a.quorum.id == q.id + 1);     // communicators rebuilt
    CHECK(a.quorum.max_step() == 0);    // the step is run again
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
    CHECK(a.quorum.members.size() == 2);
    CHECK(a.quorum.max_step() == 0);
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
    q = answers.front().quorum;
  }
  CHECK(q.max_step() == 3);
  t += milliseconds(10);
  sync.Lost("c", t);  // c dies while training step 3
  sync.Call(Voted("a", q, true), t);
  sync.Call(Voted("b", q, true), t);
  auto shrunk = sync.Tick(t);
  REQUIRE(Groups(shrunk) == std::vector<std::string>{"a", "b"});
  CHECK(shrunk.front().commit == std::optional<bool>(false));  // c was lost before it voted on step 3
  q = shrunk.front().quorum;
  t += milliseconds(10);
  sync.Call(First("c", 0), t);  // c restarted with nothing
  sync.Call(Voted("a", q, true), t);
  sync.Call(Voted("b", q, true), t);
  auto grown = sync.Tick(t);
  REQUIRE(Groups(grown) == std::vector<std::string>{"a", "b", "c"});
  CHECK(grown.back().commit == std::nullopt);
  CHECK(grown.back().quorum.id == q.id + 1);
  const size_t c = *grown.back().quorum.rank_of("c");
  CHECK(grown.back().quorum.members[c].step == 0);
  CHECK(grown.back().quorum.max_step() == q.max_step() + 1);
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

}  // namespace
}  // namespace ctrun::rdzv
