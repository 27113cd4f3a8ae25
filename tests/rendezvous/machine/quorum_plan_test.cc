// PlanFor: what one rank of a group does with a quorum.
#include "rendezvous/machine/quorum_plan.h"

#include <catch2/catch.hpp>

namespace ctrun::rdzv {
namespace {

Quorum Q(std::vector<std::pair<std::string, int64_t>> steps, int64_t id = 7) {
  Quorum q{.id = id, .members = {}};
  for (auto& [name, step] : steps) {
    q.members.push_back({.id = name, .step = step, .address = name + ":9", .commit_failures = 0});
  }
  return q;
}

TEST_CASE("PlanFor: an up-to-date group gets its rank, the world and a fresh store prefix") {
  auto plan = PlanFor(Q({{"a", 5}, {"b", 5}, {"c", 3}}), "b", 0);
  REQUIRE(plan.ok());
  CHECK(plan->quorum_id == 7);
  CHECK(plan->replica_rank == 1);
  CHECK(plan->replica_world == 3);
  CHECK(plan->max_step == 5);
  CHECK(plan->store_prefix == "ft/q7/");
  CHECK(!plan->heal);
  CHECK(plan->sources.empty());
}

TEST_CASE("PlanFor: a group behind heals from the groups at the max step, spread by rank, with alternates") {
  const Quorum q = Q({{"a", 5}, {"b", 2}, {"c", 5}, {"d", 0}});
  auto b0 = PlanFor(q, "b", 0);
  auto b1 = PlanFor(q, "b", 1);
  auto d0 = PlanFor(q, "d", 0);
  REQUIRE(b0.ok());
  REQUIRE(b1.ok());
  REQUIRE(d0.ok());
  CHECK(b0->heal);
  CHECK(b0->sources == std::vector<std::string>{"a:9", "c:9"});
  CHECK(b1->sources == std::vector<std::string>{"c:9", "a:9"});  // rank 1 of b: the next source
  CHECK(d0->sources == std::vector<std::string>{"c:9", "a:9"});  // the second group behind
}

TEST_CASE("PlanFor: a group not in the quorum is NotFound") {
  auto plan = PlanFor(Q({{"a", 1}}), "z", 0);
  REQUIRE(!plan.ok());
  CHECK(plan.status().message() == "group 'z' is not in quorum 7");
}

}  // namespace
}  // namespace ctrun::rdzv
