// Close semantics, NextDeadline's contract, and invariants over scripted runs.
#include "rendezvous/machine/machine.h"

#include <random>

#include <catch2/catch.hpp>

#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

TEST_CASE("Close tells every node and rejects later joins") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  s.Join("spare");
  CHECK(s.Close() == Lines{"Closed r0 [a b spare]"});
  CHECK(s.Join("c") == Lines{"Rejected c closed"});
  CHECK(ToStatus(std::get<Rejected>(s.last().at(0))).IsAborted());
  CHECK(s.State().closed);
  CHECK(s.State().live_nodes == 2);  // a and b still run; the spare is gone
  CHECK(s.machine().NextDeadline() == s.At(seconds(15)));  // their keep-alive expiry
}

TEST_CASE("After close, running members stay live until they leave or fall silent") {
  Script s(Nodes(3, 3));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  CHECK(s.Leave("a", LeaveReason::kNormalExit) == Lines{"Closed r0 [b c]"});
  CHECK(s.State().live_nodes == 2);
  s.Jump(seconds(10));
  CHECK(s.KeepAlive("b").empty());  // b keeps its place; c says nothing
  CHECK(s.Leave("b", LeaveReason::kNormalExit).empty());
  CHECK(s.State().live_nodes == 1);
  CHECK(s.machine().NextDeadline() == s.At(seconds(15)));  // c's keep-alive expiry
  s.Jump(seconds(5));
  CHECK(s.Tick() == Lines{"Evicted c"});
  CHECK(s.State().live_nodes == 0);
  CHECK_FALSE(s.machine().NextDeadline());
}

TEST_CASE("Close is idempotent and a closed run ignores everything but joins") {
  Script s(Nodes(1, 2));
  s.Join("a");
  s.Close();
  CHECK(s.Close().empty());
  CHECK(s.KeepAlive("a").empty());
  CHECK(s.Leave("a", LeaveReason::kFailure).empty());
  CHECK(s.Run(seconds(1000)).empty());
}

TEST_CASE("Leave(normal_exit), and failed_exit (its workers failed for good), close the run without restarting the others") {
  for (LeaveReason reason : {LeaveReason::kNormalExit, LeaveReason::kFailedExit}) {
    Script s(Nodes(2, 2));
    s.Join("a");
    s.Join("b");
    CHECK(s.Leave("a", reason) == Lines{"Closed r0 [b]"});
    CHECK(s.Join("a") == Lines{"Rejected a closed"});
  }
}

TEST_CASE("Leave(failed_exit) closes the run with its verdict, for the running nodes to stop with") {
  Script s(Nodes(2, 2));
  s.Join("a", std::nullopt, 1, 5);
  s.Join("b");
  VerdictSummary v;
  v.cls = FailureClass::kSegfault;
  v.rank = 1;
  v.line = "verdict: rank 1 on a crashed with a segmentation fault (SIGSEGV)";
  const std::vector<Decision> out = s.machine().Step(Leave{N("a"), 5, LeaveReason::kFailedExit, "", v}, TimePoint{});
  REQUIRE(out.size() == 1);
  const Closed* closed = std::get_if<Closed>(&out[0]);
  REQUIRE(closed);
  CHECK(closed->failed_exit);
  CHECK(closed->verdict == v);
  CHECK_FALSE(closed->unhealthy_budget_exceeded);
  // A normal exit's close is no failure.
  Script t(Nodes(2, 2));
  t.Join("a", std::nullopt, 1, 5);
  t.Join("b");
  const std::vector<Decision> normal = t.machine().Step(Leave{N("a"), 5, LeaveReason::kNormalExit}, TimePoint{});
  REQUIRE(normal.size() == 1);
  CHECK_FALSE(std::get<Closed>(normal[0]).failed_exit);
}

TEST_CASE("Leave(signal) does not close: the node may join again") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Leave("a", LeaveReason::kSignal);
  CHECK_FALSE(s.State().closed);
  CHECK(s.Join("a") == Lines{"Admitted a participant r0"});
}

TEST_CASE("Leave from an unknown node or another incarnation is ignored") {
  Script s(Nodes(2, 2));
  s.Join("a", std::nullopt, 1, 5);
  CHECK(s.Leave("x", LeaveReason::kNormalExit).empty());
  CHECK(s.machine().Step(Leave{N("a"), 6, LeaveReason::kNormalExit}, TimePoint{}).empty());
  CHECK_FALSE(s.State().closed);
}

TEST_CASE("A closed run's snapshot keeps the last rank table") {
  Script s(Nodes(1, 1));
  s.Join("a");
  s.Close();
  CHECK(s.State().members.size() == 1);
  CHECK_FALSE(s.machine().StatusOf(N("a")));
}

TEST_CASE("NextDeadline is the earliest of keep-alive expiry, join deadline and last call") {
  Script s(Nodes(2, 4));
  s.Join("a");
  CHECK(s.machine().NextDeadline() == s.At(seconds(15)));  // keep-alive expiry
  s.Join("b");
  s.Run(seconds(14));  // keep-alives at 5 and 10 s: expiry moves to 25 s
  CHECK(s.machine().NextDeadline() == s.At(seconds(25)));
  Params p = Nodes(1, 2);
  p.keep_alive_interval = seconds(1000);
  Script t(p);
  t.Join("a");
  CHECK(t.machine().NextDeadline() == t.At(seconds(30)));  // last call
  Params q = Nodes(2, 2);
  q.keep_alive_interval = seconds(1000);
  Script u(q);
  u.Join("a");
  CHECK(u.machine().NextDeadline() == u.At(seconds(600)));  // join timeout
}

TEST_CASE("A last call held back by a rejoining node is not a deadline") {
  Params p = Nodes(1, 2);
  p.keep_alive_interval = seconds(1000);
  Script s(p);
  s.Join("a");
  s.Join("b");
  s.Leave("b", LeaveReason::kFailure);
  s.Join("a");  // last call at 30 s, but b is expected
  CHECK(s.machine().NextDeadline() == s.At(seconds(600)));  // b's join deadline
}

TEST_CASE("Scripted run: every deadline on the way fires exactly when NextDeadline said") {
  Script s(Nodes(2, 3));
  Lines out;
  auto add = [&out](const Lines& l) { out.insert(out.end(), l.begin(), l.end()); };
  add(s.Join("n1"));
  add(s.Run(seconds(7)));
  add(s.Join("n2"));
  add(s.Run(seconds(40)));
  add(s.Join("n3"));
  s.Kill("n2");
  add(s.Run(seconds(20)));
  add(s.Join("n1"));  // the only member asked to rejoin: the round completes at once
  add(s.Run(seconds(31)));
  add(s.Join("n4"));
  add(s.Run(seconds(700)));
  CHECK(out == Lines{
                   "Admitted n1 participant r0",
                   "Admitted n2 participant r0",
                   "RoundComplete r0 [n1 n2] ws=2",  // 37 s
                   "RestartRequested r0 node_joined_wait_list cause=n3 [n1 n2]",
                   "Admitted n3 waiting r1",
                   "Evicted n2",  // silent since 45 s: evicted at 60 s
                   "Admitted n1 participant r1",
                   "RoundComplete r1 [n1 n3] ws=2",  // n1 back at 67 s: no last call after a break
                   "RestartRequested r1 node_joined_wait_list cause=n4 [n1 n3]",
                   "Admitted n4 waiting r2",
                   "TimedOut n1",  // alive but never re-joined: dropped 600 s after the break
                   "TimedOut n3",
                   "TimedOut n4",  // alone below MIN since it joined at 98 s
               });
}

// Invariants that must hold after every step, whatever happened.
void CheckInvariants(const RendezvousMachine& m, TimePoint now) {
  Snapshot st = m.State();
  Counts c = m.Tally();  // the same facts as the snapshot, as numbers
  CHECK(c.round == st.round);
  CHECK(c.complete == st.complete);
  CHECK(c.closed == st.closed);
  CHECK(c.participants == static_cast<int>(st.participants.size()));
  CHECK(c.rejoining == static_cast<int>(st.rejoining.size()));
  CHECK(c.redundant == static_cast<int>(st.redundant.size()));
  CHECK(c.members == static_cast<int>(st.members.size()));
  CHECK(c.live_nodes == st.live_nodes);
  CHECK(c.last_call_deadline == st.last_call_deadline);
  std::optional<TimePoint> next = m.NextDeadline();
  if (next) CHECK(*next > now);
  if (st.closed) {
    CHECK(st.participants.empty());
    CHECK(next.has_value() == (st.live_nodes > 0));
    return;
  }
  if (st.complete) {
    CHECK(st.participants.empty());
    CHECK(st.rejoining.empty());
    CHECK(static_cast<int>(st.members.size()) >= st.min_nodes);
    CHECK(static_cast<int>(st.members.size()) <= st.max_nodes);
    for (size_t i = 0; i < st.members.size(); ++i) CHECK(st.members[i].group_rank == static_cast<int>(i));
    if (!st.redundant.empty()) CHECK(static_cast<int>(st.members.size()) == st.max_nodes);
  } else {
    int held = static_cast<int>(st.participants.size() + st.rejoining.size());
    CHECK(held <= st.max_nodes);
    if (!st.redundant.empty()) CHECK(held == st.max_nodes);
    CHECK(st.last_call_deadline.has_value() == (static_cast<int>(st.participants.size()) >= st.min_nodes));
  }
}

TEST_CASE("Random scripted runs keep the invariants and the NextDeadline contract") {
  for (unsigned seed = 1; seed <= 30; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    int min_nodes = 1 + static_cast<int>(rng() % 3);
    Script s(Nodes(min_nodes, min_nodes + static_cast<int>(rng() % 3)));
    for (int step = 0; step < 60; ++step) {
      std::string node = "n" + std::to_string(rng() % 6);
      switch (rng() % 8) {
        case 0: case 1: case 2: s.Join(node); break;
        case 3: s.Kill(node); break;
        case 4: s.Leave(node, LeaveReason::kFailure); s.Revive(node); break;
        case 5: s.Leave(node, LeaveReason::kSignal); break;
        default: s.Run(seconds(1 + rng() % 40)); break;
      }
      CheckInvariants(s.machine(), s.At(s.Elapsed()));
    }
  }
}

TEST_CASE("Describe and Name give stable one-line forms") {
  CHECK(Describe(Evicted{N("a"), "x"}) == "Evicted a");
  CHECK(Name(RestartReason::kNodeJoinedWaitList) == "node_joined_wait_list");
  CHECK(Name(RestartReason::kWorkersFailed) == "workers_failed");
  CHECK(Name(LeaveReason::kNormalExit) == "normal_exit");
  CHECK(Name(LeaveReason::kFailedExit) == "failed_exit");
  // The info line's sentence: a failed node does not read as a normal exit.
  CHECK(Explain(LeaveReason::kNormalExit) == "its workers finished; the run is closed");
  CHECK(Explain(LeaveReason::kFailedExit) == "its workers failed with no restarts left; the run is closed");
  CHECK(Name(NodeStatus::kRejoining) == "rejoining");
  CHECK(ToStatus(Rejected{N("a"), RejectCode::kDuplicateNode, "m"}).code() == Status::Code::kFailedPrecondition);
  CHECK(ToStatus(Rejected{N("a"), RejectCode::kInvalidJoin, "m"}).IsInvalidArgument());
}

}  // namespace
}  // namespace ctrun::rdzv::testing
