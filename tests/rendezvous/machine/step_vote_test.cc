// StepVote: the commit vote of one step of one quorum.
#include "rendezvous/machine/step_vote.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace ctrun::rdzv {
namespace {

TEST_CASE("StepVote: commits when every member votes yes") {
  StepVote vote(3, 10, {"a", "b"});
  CHECK(vote.Vote("a", 3, 10, true));
  CHECK(!vote.Decision());
  CHECK(vote.Pending() == std::vector<std::string>{"b"});
  CHECK(vote.Vote("b", 3, 10, true));
  REQUIRE(vote.Decision());
  CHECK(*vote.Decision());
}

TEST_CASE("StepVote: one no, or a member lost before it voted, discards at once") {
  StepVote no(3, 10, {"a", "b", "c"});
  no.Vote("a", 3, 10, false);
  REQUIRE(no.Decision());
  CHECK(!*no.Decision());
  StepVote lost(3, 10, {"a", "b"});
  lost.Vote("a", 3, 10, true);
  lost.Lost("b");
  REQUIRE(lost.Decision());
  CHECK(!*lost.Decision());
  CHECK(lost.Pending().empty());  // its no is in: it did not miss the vote
}

TEST_CASE("StepVote: a member lost after voting yes does not undo the commit of the others") {
  StepVote vote(3, 10, {"a", "b", "c"});
  vote.Vote("c", 3, 10, true);
  vote.Lost("c");
  CHECK(!vote.Decision());
  vote.Vote("a", 3, 10, true);
  vote.Vote("b", 3, 10, true);
  REQUIRE(vote.Decision());
  CHECK(*vote.Decision());
}

TEST_CASE("StepVote: votes for another quorum, step or from outside are ignored; a second no counts") {
  StepVote vote(3, 10, {"a", "b"});
  CHECK(!vote.Vote("z", 3, 10, true));
  CHECK(!vote.Vote("a", 2, 10, false));
  CHECK(!vote.Vote("a", 3, 9, false));
  CHECK(!vote.Decision());
  vote.Vote("a", 3, 10, true);
  vote.Vote("a", 3, 10, false);
  REQUIRE(vote.Decision());
  CHECK(!*vote.Decision());
  StepVote empty(1, 1, {});
  REQUIRE(empty.Decision());
  CHECK(!*empty.Decision());
}

}  // namespace
}  // namespace ctrun::rdzv
