#include "rendezvous/machine/group_ranks.h"

#include <catch2/catch.hpp>

namespace ctrun::rdzv {
namespace {

NodeId N(const std::string& name) { return NodeId{name, 0, 0}; }
using Ids = std::vector<NodeId>;

TEST_CASE("First round: natural host order") {
  RankAssignment r = AssignGroupRanks({{N("node10"), {}, {}}, {N("node9"), {}, {}}, {N("node1"), {}, {}}});
  CHECK(r.by_rank == Ids{N("node1"), N("node9"), N("node10")});
  CHECK_FALSE(r.hints_honoured);
  CHECK(r.hint_note.empty());
}

TEST_CASE("First round: same host orders by pid then local id") {
  RankAssignment r = AssignGroupRanks({{{"h", 20, 0}, {}, {}}, {{"h", 3, 1}, {}, {}}, {{"h", 3, 0}, {}, {}}});
  CHECK(r.by_rank == Ids{{"h", 3, 0}, {"h", 3, 1}, {"h", 20, 0}});
}

TEST_CASE("Returning members keep their ranks, newcomers fill the free ones") {
  RankAssignment r = AssignGroupRanks({{N("a"), 2, {}}, {N("z"), 0, {}}, {N("new2"), {}, {}}, {N("new1"), {}, {}}});
  CHECK(r.by_rank == Ids{N("z"), N("new1"), N("a"), N("new2")});
}

TEST_CASE("A spare replacing a lost node takes exactly its rank") {
  RankAssignment r = AssignGroupRanks({{N("a"), 0, {}}, {N("c"), 2, {}}, {N("spare"), {}, {}}});
  CHECK(r.by_rank == Ids{N("a"), N("spare"), N("c")});
}

TEST_CASE("After a shrink only members whose rank no longer exists move, in old-rank order") {
  RankAssignment r = AssignGroupRanks({{N("a"), 0, {}}, {N("e"), 4, {}}, {N("d"), 3, {}}});
  CHECK(r.by_rank == Ids{N("a"), N("d"), N("e")});
}

TEST_CASE("Displaced members go before newcomers") {
  RankAssignment r = AssignGroupRanks({{N("b"), 5, {}}, {N("a"), {}, {}}});
  CHECK(r.by_rank == Ids{N("b"), N("a")});
}

TEST_CASE("Hints honoured when every node gives a distinct one below n") {
  RankAssignment r = AssignGroupRanks({{N("a"), {}, 1}, {N("b"), {}, 2}, {N("c"), {}, 0}});
  CHECK(r.hints_honoured);
  CHECK(r.by_rank == Ids{N("c"), N("a"), N("b")});
}

TEST_CASE("Hints win over previous ranks") {
  RankAssignment r = AssignGroupRanks({{N("a"), 0, 1}, {N("b"), 1, 0}});
  CHECK(r.hints_honoured);
  CHECK(r.by_rank == Ids{N("b"), N("a")});
}

TEST_CASE("Hints ignored when one node gave none") {
  RankAssignment r = AssignGroupRanks({{N("a"), {}, 1}, {N("b"), {}, {}}});
  CHECK_FALSE(r.hints_honoured);
  CHECK(r.by_rank == Ids{N("a"), N("b")});
  CHECK(r.hint_note == "--node-rank ignored: 1 of 2 nodes gave none (give every node a distinct --node-rank "
                       "below the node count, or none)");
}

TEST_CASE("Conflicting hints are ignored with a note naming both nodes") {
  RankAssignment r = AssignGroupRanks({{N("b"), {}, 0}, {N("a"), {}, 0}});
  CHECK_FALSE(r.hints_honoured);
  CHECK(r.by_rank == Ids{N("a"), N("b")});
  CHECK(r.hint_note == "--node-rank 0 ignored: given by both b and a (give each node a distinct rank)");
}

TEST_CASE("A hint not below the node count is ignored") {
  RankAssignment r = AssignGroupRanks({{N("a"), {}, 0}, {N("b"), {}, 2}});
  CHECK_FALSE(r.hints_honoured);
  CHECK(r.hint_note == "--node-rank 2 of b ignored: not below the node count 2 (give ranks 0..1)");
}

TEST_CASE("No candidates: empty table") {
  CHECK(AssignGroupRanks({}).by_rank.empty());
}

}  // namespace
}  // namespace ctrun::rdzv
