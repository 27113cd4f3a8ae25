// Forming rounds: MIN/MAX, last call, join timeout, group ranks.
#include "rendezvous/machine/machine.h"

#include <catch2/catch.hpp>

#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

TEST_CASE("Create rejects MIN > MAX with the torchrun-style message") {
  Result<RendezvousMachine> m = RendezvousMachine::Create(Nodes(3, 2));
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message() == "--nnodes '3:2': MIN must not exceed MAX (use MIN:MAX with 0 < MIN <= MAX)");
}

TEST_CASE("Create rejects MIN 0, a zero timeout and zero keep-alive attempts") {
  CHECK(RendezvousMachine::Create(Nodes(0, 2)).status().IsInvalidArgument());
  Params p = Nodes(1, 1);
  p.last_call_timeout = Duration::zero();
  CHECK(RendezvousMachine::Create(p).status().message() ==
        "--rdzv-conf last_call_timeout=0 s: must be positive (give a number of seconds > 0)");
  p = Nodes(1, 1);
  p.keep_alive_max_attempt = 0;
  CHECK(RendezvousMachine::Create(p).status().IsInvalidArgument());
}

TEST_CASE("A fresh machine is empty, forming round 0, with no deadline") {
  Script s(Nodes(1, 2));
  Snapshot st = s.State();
  CHECK(st.round == 0);
  CHECK_FALSE(st.complete);
  CHECK_FALSE(st.closed);
  CHECK(st.participants.empty());
  CHECK_FALSE(s.machine().NextDeadline());
}

TEST_CASE("Static MIN==MAX completes as soon as the last node joins") {
  Script s(Nodes(2, 2));
  CHECK(s.Join("a") == Lines{"Admitted a participant r0"});
  CHECK(s.Join("b") == Lines{"Admitted b participant r0", "RoundComplete r0 [a b] ws=2"});
  CHECK(s.State().complete);
}

TEST_CASE("RoundComplete carries ranks, local world sizes, addresses and the world size") {
  Script s(Nodes(2, 2));
  s.Join("b", std::nullopt, 4);
  s.Join("a", std::nullopt, 2);
  RoundComplete r = s.LastRound();
  REQUIRE(r.members.size() == 2);
  CHECK(r.members[0] == Member{N("a"), 0, 2, "a.ip"});
  CHECK(r.members[1] == Member{N("b"), 1, 4, "b.ip"});
  CHECK(r.world_size == 6);
}

TEST_CASE("Each member's MASTER_PORT candidate reaches RoundComplete") {
  Script s(Nodes(2, 2));
  s.Join("a", std::nullopt, 1, 0, 41001);
  s.Join("b", std::nullopt, 1, 0, 41002);
  RoundComplete r = s.LastRound();
  REQUIRE(r.members.size() == 2);
  CHECK(r.members[0].master_port == 41001);
  CHECK(r.members[1].master_port == 41002);
}

TEST_CASE("2:4 with two nodes completes at the last-call deadline, not before") {
  Script s(Nodes(2, 4));
  s.Join("a");
  s.Join("b");
  CHECK(s.State().last_call_deadline == s.At(seconds(30)));
  CHECK(s.Run(seconds(29)).empty());
  CHECK(s.Run(seconds(1)) == Lines{"RoundComplete r0 [a b] ws=2"});
  CHECK(s.Elapsed() == seconds(30));
}

TEST_CASE("2:4 last call counts from when MIN was reached, a third node rides along") {
  Script s(Nodes(2, 4));
  s.Join("a");
  s.Run(seconds(10));
  s.Join("b");  // MIN at 10 s: deadline 40 s
  s.Run(seconds(20));
  CHECK(s.Join("c") == Lines{"Admitted c participant r0"});
  CHECK(s.Run(seconds(10)) == Lines{"RoundComplete r0 [a b c] ws=3"});
  CHECK(s.Elapsed() == seconds(40));
}

TEST_CASE("2:4 completes at once when the fourth node joins") {
  Script s(Nodes(2, 4));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  CHECK(s.Join("d") == Lines{"Admitted d participant r0", "RoundComplete r0 [a b c d] ws=4"});
  CHECK_FALSE(s.State().last_call_deadline);
}

TEST_CASE("Dropping below MIN cancels the last call, reaching it again restarts it") {
  Script s(Nodes(2, 4));
  s.Join("a");
  s.Join("b");
  s.Run(seconds(10));
  s.Leave("b", LeaveReason::kSignal);
  CHECK_FALSE(s.State().last_call_deadline);
  s.Run(seconds(25));  // past the old 30 s deadline: nothing completes
  s.Join("c");         // at 35 s: deadline 65 s
  CHECK(s.Run(seconds(29)).empty());
  CHECK(s.Run(seconds(1)) == Lines{"RoundComplete r0 [a c] ws=2"});
}

TEST_CASE("Join timeout: a lone node gets TimedOut after join_timeout and is removed") {
  Script s(Nodes(2, 2));
  s.Join("a");
  CHECK(s.Run(seconds(599)).empty());
  CHECK(s.Run(seconds(1)) == Lines{"TimedOut a"});
  CHECK(s.State().participants.empty());
  CHECK_FALSE(s.machine().StatusOf(N("a")));
}

TEST_CASE("TimedOut explains the round and the fix") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Run(seconds(600));
  const TimedOut& t = std::get<TimedOut>(s.last().at(0));
  CHECK(t.message ==
        "node a got no complete round within join_timeout 600 s (round 0 has 1 of min 2 nodes): start more "
        "nodes or raise --rdzv-conf join_timeout");
  CHECK(ToStatus(t).IsDeadlineExceeded());
}

TEST_CASE("Join timeout and MIN: a timed-out participant can cancel the last call") {
  Params p = Nodes(2, 3);
  p.join_timeout = seconds(20);
  Script s(p);
  s.Join("a");
  s.Run(seconds(10));
  s.Join("b");  // last call at 40 s, but a's join deadline is 20 s
  CHECK(s.Run(seconds(10)) == Lines{"TimedOut a"});
  CHECK_FALSE(s.State().last_call_deadline);
}

TEST_CASE("First-round ranks follow natural host order: node9 before node10") {
  Script s(Nodes(3, 3));
  s.Join("node10");
  s.Join("node9");
  CHECK(s.Join("node1").back() == "RoundComplete r0 [node1 node9 node10] ws=3");
}

TEST_CASE("Node-rank hints are honoured when every node gives a valid one") {
  Script s(Nodes(2, 2));
  s.Join("a", 1);
  CHECK(s.Join("b", 0).back() == "RoundComplete r0 [b a] ws=2 hints");
}

TEST_CASE("Node-rank hints are ignored, with a note, when one node gave none") {
  Script s(Nodes(2, 2));
  s.Join("a", 1);
  s.Join("b");
  RoundComplete r = s.LastRound();
  CHECK_FALSE(r.hints_honoured);
  CHECK(Describe(r) == "RoundComplete r0 [a b] ws=2");
  CHECK_FALSE(r.hint_note.empty());
}

TEST_CASE("Conflicting node-rank hints fall back to natural order") {
  Script s(Nodes(2, 2));
  s.Join("b", 0);
  CHECK(s.Join("a", 0).back() == "RoundComplete r0 [a b] ws=2");
}

TEST_CASE("A malformed Join is rejected: local_world_size 0 or a negative hint") {
  Script s(Nodes(1, 2));
  CHECK(s.Join("a", std::nullopt, 0) == Lines{"Rejected a invalid_join"});
  CHECK(std::get<Rejected>(s.last().at(0)).message ==
        "node a: local_world_size 0 must be at least 1 (check --nproc-per-node)");
  CHECK(s.Join("b", -1) == Lines{"Rejected b invalid_join"});
  CHECK(s.State().participants.empty());
}

TEST_CASE("Snapshot gives what a status line needs while forming") {
  Script s(Nodes(2, 4));
  s.Join("a");
  s.Run(seconds(3));
  s.Join("b");
  s.Join("c");
  s.Run(seconds(2));
  Snapshot st = s.State();
  CHECK(st.participants.size() == 3);
  CHECK(st.max_nodes == 4);
  CHECK(st.min_nodes == 2);
  REQUIRE(st.last_call_deadline);
  CHECK(*st.last_call_deadline - s.At(s.Elapsed()) == seconds(28));
}

TEST_CASE("Steps apply overdue deadlines in time order before the event") {
  Params p = Nodes(2, 4);
  p.keep_alive_interval = seconds(1000);  // nobody expires here
  Script s(p);
  s.Join("a");
  s.Join("b");
  s.Jump(seconds(700));  // last call (30 s) is due, and so would be the join timeouts (600 s)
  CHECK(s.Join("c") == Lines{"RoundComplete r0 [a b] ws=2",
                             "RestartRequested r0 node_joined_wait_list cause=c [a b]",
                             "Admitted c waiting r1"});
}

TEST_CASE("A clock that goes backwards is taken as the latest time seen") {
  RendezvousMachine m = RendezvousMachine::Create(Nodes(2, 4)).value();
  TimePoint t0{};
  m.Step(Join{N("a"), 0, {}, 1, "a"}, t0 + seconds(10));
  m.Step(Join{N("b"), 0, {}, 1, "b"}, t0 + seconds(5));
  CHECK(m.State().last_call_deadline == t0 + seconds(40));
}

}  // namespace
}  // namespace ctrun::rdzv::testing
