#include "launcher/ft/group_sync.h"

#include <catch2/catch.hpp>
#include <string>

#include "base/ft_wire/host_port.h"

namespace ctrun::launcher {
namespace {

ft_wire::SyncLine Line(int rank, int64_t step, uint16_t ring, uint16_t heal,
                       std::optional<ft_wire::Ballot> ballot = {}) {
  return ft_wire::SyncLine{.local_rank = rank, .committed_step = step, .ring_port = ring, .heal_port = heal,
                           .ballot = ballot};
}

// An answer's `<right>` field as "host:port" ("" for none).
std::string Right(const ft_wire::QuorumLine& a) {
  return a.right_host.empty() ? "" : ft_wire::FormatHostPort(a.right_host, a.right_port);
}

TEST_CASE("a group's call gathers its ranks: address, committed step, and-ed ballot", "[ft][group]") {
  FtGroupSync g("node-a#1", "10.0.0.1", 2);
  REQUIRE(g.Add(Line(1, 5, 1001, 2001, ft_wire::Ballot{2, 5, true})).ok());
  CHECK_FALSE(g.complete());
  REQUIRE(g.Add(Line(0, 5, 1000, 2000, ft_wire::Ballot{2, 5, true})).ok());
  REQUIRE(g.complete());
  Result<rdzv::SyncCall> call = g.Call();
  REQUIRE(call.ok());
  CHECK(call->group == "node-a#1");
  CHECK(call->committed_step == 5);
  CHECK(call->address == "10.0.0.1|1000/2000,1001/2001");
  CHECK(call->ballot == rdzv::Ballot{2, 5, true});

  g.Reset();
  REQUIRE(g.Add(Line(0, 5, 1000, 2000, ft_wire::Ballot{2, 5, true})).ok());
  REQUIRE(g.Add(Line(1, 5, 1001, 2001, ft_wire::Ballot{2, 5, false})).ok());
  CHECK(g.Call()->ballot == rdzv::Ballot{2, 5, false});

  g.Reset();  // a rank that came late to the step's all-reduce: a late no
  REQUIRE(g.Add(Line(0, 5, 1000, 2000, ft_wire::Ballot{2, 5, false, true})).ok());
  REQUIRE(g.Add(Line(1, 5, 1001, 2001, ft_wire::Ballot{2, 5, true})).ok());
  CHECK(g.Call()->ballot == rdzv::Ballot{2, 5, false, true});

  g.Reset();  // a rank that did not vote where the other did votes no
  REQUIRE(g.Add(Line(0, 5, 1000, 2000, ft_wire::Ballot{2, 5, true})).ok());
  REQUIRE(g.Add(Line(1, 5, 1001, 2001)).ok());
  CHECK(g.Call()->ballot == rdzv::Ballot{2, 5, false});

  g.Reset();  // another quorum's ballot votes no
  REQUIRE(g.Add(Line(0, 5, 1000, 2000, ft_wire::Ballot{2, 5, true})).ok());
  REQUIRE(g.Add(Line(1, 5, 1001, 2001, ft_wire::Ballot{3, 5, true})).ok());
  CHECK(g.Call()->ballot == rdzv::Ballot{2, 5, false});

  g.Reset();
  REQUIRE(g.Add(Line(0, 0, 1000, 2000)).ok());
  REQUIRE(g.Add(Line(1, 0, 1001, 2001)).ok());
  CHECK_FALSE(g.Call()->ballot.has_value());
}

TEST_CASE("a group refuses a rank out of range, a second line, and disagreeing steps", "[ft][group]") {
  FtGroupSync g("g", "::1", 2);
  CHECK_THAT(g.Add(Line(2, 0, 1, 1)).message(), Catch::Contains("runs 2 workers"));
  REQUIRE(g.Add(Line(0, 3, 1, 1)).ok());
  CHECK_THAT(g.Add(Line(0, 3, 1, 1)).message(), Catch::Contains("second sync line"));
  REQUIRE(g.Add(Line(1, 4, 1, 1)).ok());
  Result<rdzv::SyncCall> call = g.Call();
  REQUIRE(call.status().IsInvalidArgument());
  CHECK_THAT(call.status().message(), Catch::Contains("disagree on the committed step"));
}

rdzv::SyncAnswer Answer(std::optional<bool> commit, int64_t id, std::vector<rdzv::QuorumMember> members) {
  return rdzv::SyncAnswer{.group = "", .commit = commit,
                          .quorum = std::make_shared<const rdzv::Quorum>(rdzv::Quorum{.id = id, .members = members})};
}

TEST_CASE("each rank's answer: its ring's right neighbour, healing sources, serving", "[ft][group]") {
  const std::vector<rdzv::QuorumMember> members = {
      {.id = "a", .step = 10, .address = "10.0.0.1|1000/2000,1001/2001", .commit_failures = 0},
      {.id = "b", .step = 4, .address = "10.0.0.2|1100/2100,1101/2101", .commit_failures = 0},
      {.id = "c", .step = 10, .address = "[fd00::3]|1200/2200,1201/2201", .commit_failures = 0}};
  Result<std::vector<ft_wire::QuorumLine>> a = FtRankAnswers(Answer(true, 7, members), "a", 2);
  REQUIRE(a.ok());
  REQUIRE(a->size() == 2);
  CHECK((*a)[0] == ft_wire::QuorumLine{.commit = true, .quorum_id = 7, .replica_rank = 0, .replica_world = 3,
                                       .max_step = 10, .right_host = "10.0.0.2", .right_port = 1100,
                                       .heal_sources = {}, .serve = true});
  CHECK(Right((*a)[1]) == "10.0.0.2:1101");

  Result<std::vector<ft_wire::QuorumLine>> c = FtRankAnswers(Answer(std::nullopt, 7, members), "c", 2);
  REQUIRE(c.ok());
  CHECK(Right((*c)[1]) == "10.0.0.1:1001");  // the ring wraps round
  CHECK_FALSE((*c)[0].commit.has_value());

  Result<std::vector<ft_wire::QuorumLine>> b = FtRankAnswers(Answer(std::nullopt, 7, members), "b", 2);
  REQUIRE(b.ok());
  CHECK_FALSE((*b)[0].serve);
  // rank 0 of the only healing group starts at source 0, rank 1 at source 1
  CHECK((*b)[0].heal_sources == std::vector<std::string>{"10.0.0.1:2000", "[fd00::3]:2200"});
  CHECK((*b)[1].heal_sources == std::vector<std::string>{"[fd00::3]:2201", "10.0.0.1:2001"});
  CHECK(Right((*b)[0]) == "[fd00::3]:1200");
}

TEST_CASE("one replica: no right neighbour", "[ft][group]") {
  Result<std::vector<ft_wire::QuorumLine>> a =
      FtRankAnswers(Answer(true, 1, {{.id = "a", .step = 0, .address = "h|1/2", .commit_failures = 0}}), "a", 1);
  REQUIRE(a.ok());
  CHECK(Right((*a)[0]).empty());
  CHECK_FALSE((*a)[0].serve);
}

TEST_CASE("answers refuse unreadable addresses, fewer ranks, and a group not in the quorum", "[ft][group]") {
  const rdzv::QuorumMember good{.id = "a", .step = 0, .address = "h|1/2,3/4", .commit_failures = 0};
  for (const std::string bad : {"", "h", "|1/2,3/4", "h|1/2,x/4", "h|1/2,3", "h|1/2,0/4", "h|1/2,3/99999"}) {
    INFO(bad);
    rdzv::QuorumMember m{.id = "b", .step = 0, .address = bad, .commit_failures = 0};
    Result<std::vector<ft_wire::QuorumLine>> r = FtRankAnswers(Answer(true, 1, {good, m}), "a", 2);
    REQUIRE(r.status().IsInvalidArgument());
    CHECK_THAT(r.status().message(), Catch::Contains("cannot read"));
  }
  rdzv::QuorumMember small{.id = "b", .step = 0, .address = "h|1/2", .commit_failures = 0};
  CHECK_THAT(FtRankAnswers(Answer(true, 1, {good, small}), "a", 2).status().message(),
             Catch::Contains("same number"));
  CHECK(FtRankAnswers(Answer(true, 1, {good}), "z", 2).status().IsNotFound());
}

TEST_CASE("a group of two nodes: each node's ranks are its part's, their peers the same ranks of the others",
          "[ft][group]") {
  // The server joined each group's two parts in node order.
  const std::vector<rdzv::QuorumMember> members = {
      {.id = "group-0", .step = 5, .address = "10.0.0.1|11/12;10.0.0.2|21/22", .commit_failures = 0},
      {.id = "group-1", .step = 3, .address = "10.0.1.1|31/32;10.0.1.2|41/42", .commit_failures = 0}};
  // Node 1 of group-1 runs the group's rank 1: its ring goes to group-0's
  // rank 1, and it heals from there.
  Result<std::vector<ft_wire::QuorumLine>> b = FtRankAnswers(Answer(std::nullopt, 4, members), "group-1", 1, 1, 2);
  REQUIRE(b.ok());
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].replica_rank == 1);
  CHECK(Right((*b)[0]) == "10.0.0.2:21");
  CHECK((*b)[0].heal_sources == std::vector<std::string>{"10.0.0.2:22"});
  CHECK_FALSE((*b)[0].serve);
  // Node 0 of group-0: rank 0, ring to group-1's rank 0; it serves.
  Result<std::vector<ft_wire::QuorumLine>> a = FtRankAnswers(Answer(std::nullopt, 4, members), "group-0", 1, 0, 2);
  REQUIRE(a.ok());
  CHECK(Right((*a)[0]) == "10.0.1.1:31");
  CHECK((*a)[0].heal_sources.empty());
  CHECK((*a)[0].serve);
  // A group with fewer ranks than this one's two nodes: refused.
  const std::vector<rdzv::QuorumMember> short_group = {
      members[0], {.id = "group-1", .step = 3, .address = "10.0.1.1|31/32", .commit_failures = 0}};
  CHECK_THAT(FtRankAnswers(Answer(true, 4, short_group), "group-0", 1, 0, 2).status().message(),
             Catch::Contains("same number"));
  // A part that cannot be read.
  const std::vector<rdzv::QuorumMember> bad = {
      members[0], {.id = "group-1", .step = 3, .address = "10.0.1.1|31/32;", .commit_failures = 0}};
  CHECK(FtRankAnswers(Answer(true, 4, bad), "group-0", 1, 0, 2).status().IsInvalidArgument());
}

}  // namespace
}  // namespace ctrun::launcher
