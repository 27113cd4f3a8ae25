// The machine's indexes (counts, deadlines, spares: machine.h) against the
// machine rebuilt from its exported state, and large runs.
#include "rendezvous/machine/machine.h"

#include <catch2/catch.hpp>
#include <random>

#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

Lines Described(const std::vector<Decision>& decisions) {
  Lines out;
  for (const Decision& d : decisions) out.push_back(Describe(d));
  return out;
}

// `m` and a machine rebuilt from its exported state (indexes built from
// scratch) agree on everything they report, and on the next step.
void CheckAgainstRebuilt(const RendezvousMachine& m, const Event& next, TimePoint now) {
  RendezvousMachine rebuilt = RendezvousMachine::Import(m.Export()).value();
  const Counts a = m.Tally(), b = rebuilt.Tally();
  CHECK(a.participants == b.participants);
  CHECK(a.rejoining == b.rejoining);
  CHECK(a.redundant == b.redundant);
  CHECK(a.live_nodes == b.live_nodes);
  CHECK(m.NextDeadline() == rebuilt.NextDeadline());
  CHECK(m.State() == rebuilt.State());
  const Snapshot s = m.State();
  CHECK(static_cast<size_t>(a.participants) == s.participants.size());
  CHECK(static_cast<size_t>(a.rejoining) == s.rejoining.size());
  CHECK(static_cast<size_t>(a.redundant) == s.redundant.size());
  RendezvousMachine copy = m;
  CHECK(Described(copy.Step(next, now)) == Described(rebuilt.Step(next, now)));
  CHECK(copy.NextDeadline() == rebuilt.NextDeadline());
}

TEST_CASE("The incremental indexes agree with a machine rebuilt from its state, step after step") {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    const int min_nodes = 1 + static_cast<int>(rng() % 3);
    RendezvousMachine m = RendezvousMachine::Create(Nodes(min_nodes, min_nodes + static_cast<int>(rng() % 3))).value();
    TimePoint now{};
    for (int step = 0; step < 80; ++step) {
      const NodeId node = N("n" + std::to_string(rng() % 7));
      Event e = Tick{};
      switch (rng() % 9) {
        case 0: case 1: case 2: e = Join{node, 0, std::nullopt, 1, node.addr, 0}; break;
        case 3: e = KeepAlive{node, 0}; break;
        case 4: e = Leave{node, 0, LeaveReason::kFailure}; break;
        case 5: e = Leave{node, 0, LeaveReason::kSignal}; break;
        case 6: e = Join{node, 1, std::nullopt, 2, node.addr, 0}; break;  // another incarnation
        default: now += seconds(1 + rng() % 20); break;
      }
      CheckAgainstRebuilt(m, e, now);
      m.Step(e, now);
    }
  }
}

TEST_CASE("Thousands of nodes: deadlines follow the oldest keep-alive, silent nodes go together in node order") {
  Params p = Nodes(3000, 3000);
  RendezvousMachine m = RendezvousMachine::Create(p).value();
  const TimePoint t0{};
  for (int i = 0; i < 3000; ++i) m.Step(Join{N("n" + std::to_string(i)), 0, std::nullopt, 1, "", 0}, t0);
  CHECK(m.Tally().complete);
  CHECK(m.Tally().members == 3000);
  // Every node but n5, n17 and n2999 refreshes at 10 s.
  for (int i = 0; i < 3000; ++i) {
    if (i != 5 && i != 17 && i != 2999) m.Step(KeepAlive{N("n" + std::to_string(i)), 0}, t0 + seconds(10));
  }
  // The three silent ones expire together, 15 s after their join.
  CHECK(m.NextDeadline() == t0 + seconds(15));
  std::vector<Decision> out = m.Step(Tick{}, t0 + seconds(20));
  REQUIRE(out.size() == 4);
  CHECK(Describe(out[0]) == "Evicted n5");
  CHECK(Describe(out[1]) == "Evicted n17");
  CHECK(Describe(out[2]) == "Evicted n2999");
  const RestartRequested& r = std::get<RestartRequested>(out[3]);
  CHECK(r.cause == N("n5"));
  CHECK(r.nodes.size() == 2997);
  CHECK(m.Tally().rejoining == 2997);
  CHECK(m.NextDeadline() == t0 + seconds(10) + seconds(15));
}

TEST_CASE("Spares are promoted in arrival order whatever their ids") {
  Script s(Nodes(2, 2));
  s.Join("z");
  s.Join("y");  // round 0 [y z]
  s.Join("b");
  s.Join("a");
  s.Join("c");  // spares, in arrival order b a c
  CHECK(s.State().redundant == std::vector<NodeId>{N("b"), N("a"), N("c")});
  CHECK(s.Leave("z", LeaveReason::kSignal) ==
        Lines{"RestartRequested r0 node_left cause=z [y]", "Admitted b participant r1"});
  CHECK(s.Leave("y", LeaveReason::kSignal) ==
        Lines{"Admitted a participant r1", "RoundComplete r1 [a b] ws=2"});
  CHECK(s.State().redundant == std::vector<NodeId>{N("c")});
}

// Round 3 of the nodes n0..n4, one worker each.
RoundComplete FiveNodeRound() {
  RoundComplete round{3, {}, 0, false, ""};
  for (int i = 0; i < 5; ++i) round.members.push_back(Member{N("n" + std::to_string(i)), i, 1, "", 0});
  round.world_size = 5;
  return round;
}

TEST_CASE("Describe shows at most the given number of node ids, then a count") {
  RoundComplete round = FiveNodeRound();
  CHECK(Describe(round) == "RoundComplete r3 [n0 n1 n2 n3 n4] ws=5");
  CHECK(Describe(round, 2) == "RoundComplete r3 [n0 n1 ... +3 more] ws=5");
  CHECK(Describe(round, 5) == "RoundComplete r3 [n0 n1 n2 n3 n4] ws=5");
  const RestartRequested restart{1, RestartReason::kNodeLost, N("x"), {N("a"), N("b"), N("c")}};
  CHECK(Describe(restart, 1) == "RestartRequested r1 node_lost cause=x [a ... +2 more]");
  CHECK(Describe(Closed{2, {N("a"), N("b")}}, 0) == "Closed r2 [ ... +2 more]");
}

TEST_CASE("Narrate says each decision as a plain sentence, node lists cut as Describe's") {
  RoundComplete round = FiveNodeRound();
  CHECK(Narrate(round) == "round 3 formed: 5 nodes (n0, n1, n2, n3, n4), world size 5");
  CHECK(Narrate(round, 2) == "round 3 formed: 5 nodes (n0, n1 and 3 more), world size 5");
  round.hints_honoured = true;
  CHECK(Narrate(round, 2) == "round 3 formed: 5 nodes (n0, n1 and 3 more), world size 5, in the nodes' --node-rank order");
  CHECK(Narrate(RestartRequested{1, RestartReason::kNodeLost, N("x"), {N("a"), N("b")}}) ==
        "round 1 ends for a restart: node x was lost (its connection or keep-alives stopped) (2 nodes told)");
  CHECK(Narrate(RestartRequested{1, RestartReason::kWorkersFailed, N("x"), {N("a")}}) ==
        "round 1 ends for a restart: the workers of node x failed (1 node told)");
  CHECK(Narrate(RestartRequested{1, RestartReason::kNodeJoinedWaitList, N("x"), {N("a")}}) ==
        "round 1 ends for a restart: node x is waiting to join (1 node told)");
  CHECK(Narrate(Closed{2, {N("a"), N("b")}}) == "the run is closed after round 2 (2 nodes told)");
  CHECK(Narrate(Admitted{N("a"), AdmitState::kRedundant, 0}) == "node a waits as a spare (the run is full)");
  CHECK(Narrate(TimedOut{N("a"), "x"}) == "node a gave up waiting for a round");
  // No decision is narrated in the machine's own terms.
  for (const Decision& d : std::vector<Decision>{round, Closed{2, {N("a")}}, Evicted{N("a"), "x"}}) {
    const std::string line = Narrate(d);
    for (const char* term : {"RoundComplete", "Closed r", "ws=", "Evicted", " r2", " r3"}) {
      INFO(line);
      CHECK(line.find(term) == std::string::npos);
    }
  }
}

}  // namespace
}  // namespace ctrun::rdzv::testing
