// Running rounds: wait list, spares, keep-alives, leaves, re-joins, ranks across rounds.
#include "rendezvous/machine/machine.h"

#include <catch2/catch.hpp>

#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

// a, b, c complete round 0 of a 3:3 run at time 0.
Script Running3() {
  Script s(Nodes(3, 3));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  return s;
}

TEST_CASE("A late node triggers a scale-up restart and is admitted into the next round") {
  Script s(Nodes(2, 3));
  s.Join("a");
  s.Join("b");
  s.Run(seconds(30));
  CHECK(s.Join("c") == Lines{"RestartRequested r0 node_joined_wait_list cause=c [a b]", "Admitted c waiting r1"});
  const RestartRequested& r = std::get<RestartRequested>(s.last().at(0));
  CHECK(r.reason == RestartReason::kNodeJoinedWaitList);  // the agent does not charge its restart budget
  CHECK(s.State().round == 1);
  CHECK(s.State().rejoining == std::vector<NodeId>{N("a"), N("b")});
}

TEST_CASE("After a scale-up restart the members re-join, keep their ranks, and the newcomer takes the next") {
  Script s(Nodes(2, 3));
  s.Join("node2");
  s.Join("node10");
  s.Run(seconds(30));
  s.Join("node1");
  CHECK(s.Join("node10") == Lines{"Admitted node10 participant r1"});
  CHECK(s.Join("node2").back() == "RoundComplete r1 [node2 node10 node1] ws=3");
}

TEST_CASE("Rejoining members block completion even after the last call passes") {
  Script s(Nodes(2, 4));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  s.Run(seconds(30));  // round 0: [a b c]
  CHECK(s.Leave("c", LeaveReason::kFailure) == Lines{"RestartRequested r0 workers_failed cause=c [a b]"});
  s.Revive("c");  // its agent keeps sending keep-alives while it stops its workers
  s.Join("a");
  s.Join("b");  // MIN reached at 30 s: last call 60 s
  CHECK(s.Run(seconds(40)).empty());
  CHECK(s.Join("c").back() == "RoundComplete r1 [a b c] ws=3");
}

TEST_CASE("A rejoining node that exits on a signal no longer blocks the round") {
  Script s(Nodes(2, 4));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  s.Run(seconds(30));
  s.Leave("c", LeaveReason::kFailure);
  s.Join("a");
  s.Join("b");
  CHECK(s.Leave("c", LeaveReason::kSignal) == Lines{"RoundComplete r1 [a b] ws=2"});
  CHECK(s.Run(seconds(30)).empty());
}

TEST_CASE("A silent rejoining node is dropped at its join deadline") {
  Params p = Nodes(1, 2);
  p.join_timeout = seconds(40);
  p.keep_alive_interval = seconds(100);
  Script s(p);
  s.Join("a");
  s.Join("b");  // complete at once: [a b]
  s.Leave("b", LeaveReason::kFailure);  // b expected back by 40 s
  s.Run(seconds(5));
  s.Join("a");  // last call at 35 s, held back by b
  CHECK(s.Run(seconds(35)) == Lines{"TimedOut b", "RoundComplete r1 [a] ws=1"});
}

TEST_CASE("Keep-alive expiry evicts a member and tells the survivors at once") {
  Script s = Running3();
  s.Kill("c");
  CHECK(s.Run(seconds(14)).empty());
  CHECK(s.Run(seconds(1)) == Lines{"Evicted c", "RestartRequested r0 node_lost cause=c [a b]"});
  CHECK(s.Elapsed() == seconds(15));
  CHECK(s.State().rejoining == std::vector<NodeId>{N("a"), N("b")});
}

TEST_CASE("A keep-alive just before expiry keeps the node") {
  Script s = Running3();
  s.Kill("c");
  s.Run(milliseconds(14999));
  s.KeepAlive("c");
  CHECK(s.Run(milliseconds(14999)).empty());
  CHECK(s.Run(milliseconds(1)) == Lines{"Evicted c", "RestartRequested r0 node_lost cause=c [a b]"});
}

TEST_CASE("Nodes expiring together give one restart naming none of the dead") {
  Script s = Running3();
  s.Kill("a");
  s.Kill("b");
  CHECK(s.Run(seconds(15)) == Lines{"Evicted a", "Evicted b", "RestartRequested r0 node_lost cause=a [c]"});
}

TEST_CASE("An evicted node's keep-alive is refused, it must join again") {
  Script s = Running3();
  s.Kill("c");
  s.Run(seconds(15));
  CHECK(s.KeepAlive("c") == Lines{"Rejected c unknown_node"});
  CHECK(ToStatus(std::get<Rejected>(s.last().at(0))).IsNotFound());
}

TEST_CASE("Survivors of a lost node re-form as soon as they are back, with no last call") {
  Script s(Nodes(2, 3));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  s.Kill("b");
  s.Run(seconds(15));
  CHECK(s.Join("a") == Lines{"Admitted a participant r1"});
  CHECK(s.Join("c").back() == "RoundComplete r1 [a c] ws=2");
  CHECK(s.LastRound().members[1].group_rank == 1);  // c moved down from 2: rank 2 no longer exists
}

TEST_CASE("Beyond MAX a node is a hot spare: no restart, no join timeout") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  CHECK(s.Join("spare") == Lines{"Admitted spare redundant r0"});
  CHECK(s.Run(seconds(700)).empty());
  CHECK(s.State().redundant == std::vector<NodeId>{N("spare")});
}

TEST_CASE("A spare is promoted when a member dies and takes the dead node's rank") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  s.Join("spare");
  s.Kill("a");
  CHECK(s.Run(seconds(15)) ==
        Lines{"Evicted a", "RestartRequested r0 node_lost cause=a [b]", "Admitted spare participant r1"});
  CHECK(s.Join("b").back() == "RoundComplete r1 [spare b] ws=2");
}

TEST_CASE("Spares are promoted in arrival order") {
  Script s(Nodes(1, 1));
  s.Join("a");
  s.Join("z");
  s.Join("m");
  CHECK(s.Leave("a", LeaveReason::kSignal) == Lines{"Admitted z participant r1", "RoundComplete r1 [z] ws=1"});
  CHECK(s.State().redundant == std::vector<NodeId>{N("m")});
}

TEST_CASE("A forming round that is full turns newcomers into spares") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  s.Leave("a", LeaveReason::kFailure);  // a rejoining, b rejoining: the run is full
  CHECK(s.Join("c") == Lines{"Admitted c redundant r1"});
}

TEST_CASE("Leave(failure) from a member breaks the round, the node stays expected") {
  Script s = Running3();
  CHECK(s.Leave("b", LeaveReason::kFailure) == Lines{"RestartRequested r0 workers_failed cause=b [a c]"});
  CHECK(s.machine().StatusOf(N("b")) == NodeStatus::kRejoining);
  CHECK_FALSE(s.State().closed);
}

TEST_CASE("Leave(signal) from a member scales down without closing") {
  Script s(Nodes(1, 3));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  CHECK(s.Leave("b", LeaveReason::kSignal) == Lines{"RestartRequested r0 node_left cause=b [a c]"});
  CHECK_FALSE(s.machine().StatusOf(N("b")));
  CHECK(s.Join("b") == Lines{"Admitted b participant r1"});
}

TEST_CASE("A member's repeated Join means it restarted: the round breaks") {
  Script s = Running3();
  // Its workers failed (it never left): the others are told so, naming it.
  CHECK(s.Join("a") == Lines{"RestartRequested r0 workers_failed cause=a [b c]", "Admitted a participant r1"});
}

TEST_CASE("A repeated Join of a waiting node is idempotent and keeps its join deadline") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Run(seconds(300));
  CHECK(s.Join("a") == Lines{"Admitted a participant r0"});
  CHECK(s.Run(seconds(300)) == Lines{"TimedOut a"});
}

TEST_CASE("A Join with another incarnation of a live node is rejected") {
  Script s(Nodes(2, 2));
  s.Join("a", std::nullopt, 1, 7);
  CHECK(s.Join("a", std::nullopt, 1, 8) == Lines{"Rejected a duplicate_node"});
  CHECK(std::get<Rejected>(s.last().at(0)).message ==
        "node a is already in the run as another live agent: give each agent a distinct --local-addr, or retry "
        "after 15 s if the old agent died");
  CHECK(s.KeepAlive("a", 8) == Lines{"Rejected a duplicate_node"});
}

TEST_CASE("After the old incarnation expires a new one may join") {
  Script s(Nodes(2, 2));
  s.Join("a", std::nullopt, 1, 7);
  s.Kill("a");
  s.Run(seconds(15));
  CHECK(s.Join("a", std::nullopt, 1, 8) == Lines{"Admitted a participant r0"});
}

TEST_CASE("Group ranks stay stable across rounds with newcomers") {
  Script s(Nodes(1, 4));
  s.Join("node10");
  s.Join("node9");
  s.Run(seconds(30));  // r0: node9=0 node10=1
  s.Join("node1");     // scale-up
  s.Join("node10");
  CHECK(s.Join("node9").back() == "RoundComplete r1 [node9 node10 node1] ws=3");
  s.Join("node0");
  s.Join("node1");
  s.Join("node9");
  CHECK(s.Join("node10").back() == "RoundComplete r2 [node9 node10 node1 node0] ws=4");
}

TEST_CASE("After a member leaves, only nodes whose rank no longer exists move") {
  Script s(Nodes(1, 4));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  s.Join("d");  // r0: a0 b1 c2 d3
  s.Leave("b", LeaveReason::kSignal);
  s.Join("c");
  s.Join("d");
  CHECK(s.Join("a").back() == "RoundComplete r1 [a d c] ws=3");
}

TEST_CASE("Leave(failure) from a participant of a forming round removes it") {
  Script s(Nodes(2, 3));
  s.Join("a");
  CHECK(s.Leave("a", LeaveReason::kFailure).empty());
  CHECK_FALSE(s.machine().StatusOf(N("a")));
}

TEST_CASE("Leave(failure) from a node already rejoining changes nothing") {
  Script s = Running3();
  s.Leave("a", LeaveReason::kFailure);
  Snapshot before = s.State();
  CHECK(s.Leave("b", LeaveReason::kFailure).empty());
  CHECK(s.State() == before);
}

TEST_CASE("A silent spare is evicted without restarting anyone") {
  Script s(Nodes(1, 1));
  s.Join("a");
  s.Join("spare");
  s.Kill("spare");
  CHECK(s.Run(seconds(15)) == Lines{"Evicted spare"});
  CHECK(s.Latest<Evicted>().message ==
        "node spare sent no keep-alive for 15 s: evicted (check that its agent runs and reaches the endpoint)");
  CHECK(s.State().complete);
}

TEST_CASE("Hints that no longer fit after a shrink fall back to stable ranks") {
  Script s(Nodes(1, 3));
  s.Join("a", 2);
  s.Join("b", 1);
  CHECK(s.Join("c", 0).back() == "RoundComplete r0 [c b a] ws=3 hints");
  s.Leave("b", LeaveReason::kSignal);
  s.Join("a", 2);
  CHECK(s.Join("c", 0).back() == "RoundComplete r1 [c a] ws=2");
  CHECK(s.LastRound().hint_note == "--node-rank 2 of a ignored: not below the node count 2 (give ranks 0..1)");
}

}  // namespace
}  // namespace ctrun::rdzv::testing
