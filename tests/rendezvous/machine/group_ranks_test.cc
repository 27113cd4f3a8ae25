#include "rendezvous/machine/group_ranks.h"

#include <catch2/catch.hpp>

namespace ctrun::rdzv {
namespace {

NodeId RankNode(const std::string& name) { return NodeId{name, 0, 0}; }
using RankIds = std::vector<NodeId>;

TEST_CASE("First round: natural host order") {
  RankAssignment r =
      AssignGroupRanks({{RankNode("node10"), {}, {}}, {RankNode("node9"), {}, {}}, {RankNode("node1"), {}, {}}});
  CHECK(r.by_rank == RankIds{RankNode("node1"), RankNode("node9"), RankNode("node10")});
  CHECK_FALSE(r.hints_honoured);
  CHECK(r.hint_note.empty());
}

TEST_CASE("First round: same host orders by pid then local id") {
  RankAssignment r = AssignGroupRanks({{{"h", 20, 0}, {}, {}}, {{"h", 3, 1}, {}, {}}, {{"h", 3, 0}, {}, {}}});
  CHECK(r.by_rank == RankIds{{"h", 3, 0}, {"h", 3, 1}, {"h", 20, 0}});
}

TEST_CASE("Returning members keep their ranks, newcomers fill the free ones") {
  RankAssignment r = AssignGroupRanks(
      {{RankNode("a"), 2, {}}, {RankNode("z"), 0, {}}, {RankNode("new2"), {}, {}}, {RankNode("new1"), {}, {}}});
  CHECK(r.by_rank == RankIds{RankNode("z"), RankNode("new1"), RankNode("a"), RankNode("new2")});
}

TEST_CASE("A spare replacing a lost node takes exactly its rank") {
  RankAssignment r = AssignGroupRanks({{RankNode("a"), 0, {}}, {RankNode("c"), 2, {}}, {RankNode("spare"), {}, {}}});
  CHECK(r.by_rank == RankIds{RankNode("a"), RankNode("spare"), RankNode("c")});
}

TEST_CASE("After a shrink only members whose rank no longer exists move, in old-rank order") {
  RankAssignment r = AssignGroupRanks({{RankNode("a"), 0, {}}, {RankNode("e"), 4, {}}, {RankNode("d"), 3, {}}});
  CHECK(r.by_rank == RankIds{RankNode("a"), RankNode("d"), RankNode("e")});
}

TEST_CASE("Displaced members go before newcomers") {
  RankAssignment r = AssignGroupRanks({{RankNode("b"), 5, {}}, {RankNode("a"), {}, {}}});
  CHECK(r.by_rank == RankIds{RankNode("b"), RankNode("a")});
}

TEST_CASE("Hints honoured when every node gives a distinct one below n") {
  RankAssignment r = AssignGroupRanks({{RankNode("a"), {}, 1}, {RankNode("b"), {}, 2}, {RankNode("c"), {}, 0}});
  CHECK(r.hints_honoured);
  CHECK(r.by_rank == RankIds{RankNode("c"), RankNode("a"), RankNode("b")});
}

TEST_CASE("Hints win over previous ranks") {
  RankAssignment r = AssignGroupRanks({{RankNode("a"), 0, 1}, {RankNode("b"), 1, 0}});
  CHECK(r.hints_honoured);
  CHECK(r.by_rank == RankIds{RankNode("b"), RankNode("a")});
}

TEST_CASE("Hints ignored when one node gave none") {
  RankAssignment r = AssignGroupRanks({{RankNode("a"), {}, 1}, {RankNode("b"), {}, {}}});
  CHECK_FALSE(r.hints_honoured);
  CHECK(r.by_rank == RankIds{RankNode("a"), RankNode("b")});
  CHECK(r.hint_note == "--node-rank ignored: 1 of 2 nodes gave none (give every node a distinct --node-rank "
                       "below the node count, or none)");
}

TEST_CASE("Conflicting hints are ignored with a note naming both nodes") {
  RankAssignment r = AssignGroupRanks({{RankNode("b"), {}, 0}, {RankNode("a"), {}, 0}});
  CHECK_FALSE(r.hints_honoured);
  CHECK(r.by_rank == RankIds{RankNode("a"), RankNode("b")});
  CHECK(r.hint_note == "--node-rank 0 ignored: given by both b and a (give each node a distinct rank)");
}

TEST_CASE("A hint not below the node count is ignored") {
  RankAssignment r = AssignGroupRanks({{RankNode("a"), {}, 0}, {RankNode("b"), {}, 2}});
  CHECK_FALSE(r.hints_honoured);
  CHECK(r.hint_note == "--node-rank 2 of b ignored: not below the node count 2 (give ranks 0..1)");
}

TEST_CASE("No candidates: empty table") {
  CHECK(AssignGroupRanks({}).by_rank.empty());
}

}  // namespace
}  // namespace ctrun::rdzv
