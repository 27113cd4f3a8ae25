// QuorumMachine: the per-step quorum of --ft-replicas, torchft's semantics.
#include "rendezvous/machine/quorum.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace ctrun::rdzv {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const TimePoint kQuorumT0{};

QuorumMember M(const std::string& id, int64_t step = 0, int64_t failures = 0) {
  return QuorumMember{.id = id, .step = step, .address = id + ":1", .commit_failures = failures};
}

std::vector<std::string> Ids(const Quorum& q) {
  std::vector<std::string> out;
  for (const auto& m : q.members) out.push_back(m.id);
  return out;
}

QuorumParams QuorumTestParams(int min = 1, int max = 1 << 20) {
  return QuorumParams{.min_replicas = min, .max_replicas = max, .join_timeout = seconds(60),
                      .heartbeat_timeout = seconds(5)};
}

// Three groups that all heartbeat at `t`, then all ask: quorum 1 of a, b, c.
QuorumMachine ThreeFormed(TimePoint t, QuorumParams params = QuorumTestParams(2)) {
  QuorumMachine q(params);
  for (const char* id : {"a", "b", "c"}) q.Heartbeat(id, t);
  q.Request(M("c"), t);
  q.Request(M("a"), t);
  REQUIRE(!q.Tick(t));  // 2 of 3 healthy asking: waits for the third
  q.Request(M("b"), t);
  auto formed = q.Tick(t);
  REQUIRE(formed);
  REQUIRE(formed->id == 1);
  REQUIRE(Ids(*formed) == std::vector<std::string>{"a", "b", "c"});
  return q;
}

TEST_CASE("Quorum: the first quorum forms at once when every healthy group asks") {
  QuorumMachine q = ThreeFormed(kQuorumT0);
  CHECK(q.Waiting().empty());
  CHECK_THAT(q.reason(), Catch::StartsWith("new quorum (3 asking, 3 healthy, min 2)"));
}

TEST_CASE("Quorum: fast path, the same members again keep the quorum id") {
  QuorumMachine q = ThreeFormed(kQuorumT0);
  const TimePoint t = kQuorumT0 + milliseconds(50);
  q.Request(M("a", 1), t);
  q.Request(M("b", 1), t);
  CHECK(!q.Tick(t));  // c not back yet: a step is a barrier across the groups
  q.Request(M("c", 1), t);
  auto next = q.Tick(t);
  REQUIRE(next);
  CHECK(next->id == 1);
  CHECK(next->max_step() == 1);
  CHECK_THAT(q.reason(), Catch::StartsWith("fast quorum"));
}

TEST_CASE("Quorum: a lost group shrinks the next quorum at once, with a new id") {
  QuorumMachine q = ThreeFormed(kQuorumT0);
  const TimePoint t = kQuorumT0 + milliseconds(50);
  q.Request(M("a", 1), t);
  q.Lost("c", t);
  q.Request(M("b", 1), t);
  auto next = q.Tick(t);  // no join timeout: every healthy group asked
  REQUIRE(next);
  CHECK(next->id == 2);
  CHECK(Ids(*next) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("Quorum: a silent group is waited for until its heartbeat is stale") {
  QuorumMachine q = ThreeFormed(kQuorumT0);
  const TimePoint t = kQuorumT0 + seconds(1);
  q.Heartbeat("c", t);  // c's last sign of life
  q.Request(M("a", 1), t);
  q.Request(M("b", 1), t);
  CHECK(!q.Tick(t));
  const TimePoint later = t + seconds(4);
  q.Heartbeat("a", later);  // the waiting groups' agents go on heartbeating
  q.Heartbeat("b", later);
  const auto deadline = q.NextDeadline(later);
  REQUIRE(deadline);
  CHECK(*deadline == t + seconds(5));  // c stale before the 60 s join timeout
  CHECK(!q.Tick(*deadline - milliseconds(1)));
  auto next = q.Tick(*deadline);
  REQUIRE(next);
  CHECK(Ids(*next) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("Quorum: a healthy straggler is waited for until the join timeout") {
  QuorumMachine q(QuorumTestParams(1));
  for (const char* id : {"a", "b"}) q.Heartbeat(id, kQuorumT0);
  q.Request(M("a"), kQuorumT0);
  q.Request(M("b"), kQuorumT0);
  auto first = q.Tick(kQuorumT0);
  REQUIRE(first);
  q.Heartbeat("c", kQuorumT0);  // a new group, alive but not asking
  const TimePoint t = kQuorumT0 + seconds(1);
  q.Heartbeat("c", t);
  q.Request(M("a", 1), t);
  q.Request(M("b", 1), t);
  // The previous members are all back: the fast path does not wait for c.
  auto fast = q.Tick(t);
  REQUIRE(fast);
  CHECK(fast->id == first->id);
}

TEST_CASE("Quorum: a minority of the healthy groups never forms a quorum (split brain)") {
  QuorumMachine q = ThreeFormed(kQuorumT0, QuorumTestParams(1));
  TimePoint t = kQuorumT0;
  for (int i = 0; i < 30; ++i) {  // b and c stay alive but never ask, for 150 s
    t += seconds(5) - milliseconds(1);
    q.Heartbeat("b", t);
    q.Heartbeat("c", t);
    q.Request(M("a", 1), t);
    REQUIRE(!q.Tick(t));
  }
  CHECK_THAT(q.reason(), Catch::StartsWith("waiting: the groups asking are not a majority"));
}

TEST_CASE("Quorum: fewer than MIN groups never form a quorum") {
  QuorumMachine q(QuorumTestParams(2));
  q.Request(M("a"), kQuorumT0);
  CHECK(!q.Tick(kQuorumT0 + seconds(1)));
  CHECK_THAT(q.reason(), Catch::StartsWith("waiting: fewer groups asking than --ft-replicas MIN"));
  q.Lost("a", kQuorumT0 + seconds(2));
  CHECK(q.Waiting().empty());
  CHECK(!q.NextDeadline(kQuorumT0 + seconds(2)));
}

TEST_CASE("Quorum: MAX takes the previous members first, the rest stay waiting as spares") {
  QuorumMachine q(QuorumTestParams(1, 2));
  q.Request(M("b"), kQuorumT0);
  q.Request(M("c"), kQuorumT0);
  auto first = q.Tick(kQuorumT0);
  REQUIRE(first);
  CHECK(Ids(*first) == std::vector<std::string>{"b", "c"});
  const TimePoint t = kQuorumT0 + seconds(1);
  q.Request(M("a"), t);  // a spare: first seen after b and c
  q.Request(M("b", 1), t);
  q.Request(M("c", 1), t);
  auto second = q.Tick(t);
  REQUIRE(second);
  CHECK(Ids(*second) == std::vector<std::string>{"b", "c"});
  CHECK(q.Waiting() == std::vector<std::string>{"a"});
  q.Lost("c", t);  // the spare takes c's place in the next quorum
  q.Request(M("b", 2), t);
  auto third = q.Tick(t);
  REQUIRE(third);
  CHECK(Ids(*third) == std::vector<std::string>{"a", "b"});
  CHECK(third->id == second->id + 1);
}

TEST_CASE("Quorum: a group back after a loss joins the next quorum, and the id changes") {
  QuorumMachine q = ThreeFormed(kQuorumT0);
  TimePoint t = kQuorumT0 + seconds(1);
  q.Lost("c", t);
  q.Request(M("a", 1), t);
  q.Request(M("b", 1), t);
  auto shrunk = q.Tick(t);
  REQUIRE(shrunk);
  t += seconds(1);
  q.Request(M("c", 0), t);  // restarted: behind, it will heal
  q.Request(M("a", 2), t);
  q.Request(M("b", 2), t);
  auto grown = q.Tick(t);
  REQUIRE(grown);
  CHECK(Ids(*grown) == std::vector<std::string>{"a", "b", "c"});
  CHECK(grown->id == shrunk->id + 1);
  CHECK(grown->max_step() == 2);
}

TEST_CASE("Quorum: commit failures bump the id with the same members") {
  QuorumMachine q = ThreeFormed(kQuorumT0);
  const TimePoint t = kQuorumT0 + seconds(1);
  q.Request(M("a", 0, 1), t);
  q.Request(M("b"), t);
  q.Request(M("c"), t);
  auto next = q.Tick(t);
  REQUIRE(next);
  CHECK(next->id == 2);
}

TEST_CASE("Quorum: bad parameters are one line naming the flag") {
  CHECK(CheckQuorumParams(QuorumTestParams(1, 3)).ok());
  CHECK(CheckQuorumParams(QuorumTestParams(0)).message() ==
        "quorum: min_replicas 0 is below 1; give --ft-replicas MIN:MAX with MIN >= 1");
  CHECK(CheckQuorumParams(QuorumTestParams(3, 2)).message() ==
        "quorum: max_replicas 2 is below min_replicas 3; give --ft-replicas MIN:MAX with MIN <= MAX");
  QuorumParams zero = QuorumTestParams();
  zero.join_timeout = Duration::zero();
  CHECK(!CheckQuorumParams(zero).ok());
}

}  // namespace
}  // namespace ctrun::rdzv
