// QuorumLookup: each member's compact part of a quorum is what PlanFor and
// the quorum itself give that member.
#include "rendezvous/machine/quorum_lookup.h"

#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <string>

#include "rendezvous/machine/quorum_plan.h"

namespace ctrun::rdzv {
namespace {

std::shared_ptr<const Quorum> RandomQuorum(std::mt19937& rng, size_t n) {
  Quorum q{.id = 7, .members = {}};
  for (size_t i = 0; i < n; ++i) {
    const std::string id = "g" + std::to_string(100 + i);  // sorted by id
    q.members.push_back(QuorumMember{.id = id, .step = 10 + static_cast<int64_t>(rng() % 3),
                                     .address = id + ":1", .commit_failures = 0});
  }
  return std::make_shared<const Quorum>(std::move(q));
}

TEST_CASE("QuorumLookup: each member's part agrees with the quorum and PlanFor, for every rank of its group") {
  std::mt19937 rng(45);
  for (size_t n : {1, 2, 3, 5, 17, 64}) {
    for (int round = 0; round < 20; ++round) {
      auto q = RandomQuorum(rng, n);
      const QuorumLookup lookup(q);
      for (size_t i = 0; i < n; ++i) {
        const QuorumMember& me = q->members[i];
        std::optional<CompactPart> part = lookup.PartOf(me.id, 4);
        REQUIRE(part);
        CHECK(part->rank == static_cast<int>(i));
        CHECK(part->world == static_cast<int>(n));
        CHECK(part->max_step == q->max_step());
        CHECK(part->right == (n > 1 ? &q->members[(i + 1) % n] : nullptr));
        bool behind = false;
        for (const auto& m : q->members) behind = behind || m.step < q->max_step();
        CHECK(part->serve == (me.step == q->max_step() && behind));
        for (int r = 0; r < 4; ++r) {  // rank r of the group takes sources[r] first, as PlanFor's rank r
          Result<QuorumPlan> plan = PlanFor(*q, me.id, r);
          REQUIRE(plan.ok());
          CHECK(part->heal == plan->heal);
          if (!plan->heal) continue;
          REQUIRE(part->sources.size() == std::min<size_t>(4, plan->sources.size()));
          if (static_cast<size_t>(r) < part->sources.size()) CHECK(part->sources[r]->address == plan->sources[0]);
          CHECK(part->sources[0]->address == PlanFor(*q, me.id, 0)->sources[0]);
        }
      }
      CHECK_FALSE(lookup.PartOf("nobody", 4));
    }
  }
}

}  // namespace
}  // namespace ctrun::rdzv
