// Unhealthy nodes: Leave{kUnhealthy} removes the node, a spare takes its
// group rank, the run counts it, and closes once the budget is exceeded.
#include "rendezvous/machine/machine.h"

#include <catch2/catch.hpp>

#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

Params WithBudget(int min_nodes, int max_nodes, int budget) {
  Params p = Nodes(min_nodes, max_nodes);
  p.max_unhealthy_nodes = budget;
  return p;
}

TEST_CASE("An unhealthy member leaves, the waiting spare takes its group rank") {
  Script s(WithBudget(3, 3, 1));
  s.Join("a");
  s.Join("b");
  s.Join("c");  // round 0: a=0 b=1 c=2
  CHECK(s.Join("d") == Lines{"Admitted d redundant r0"});
  CHECK(s.LeaveUnhealthy("b", "health check 'x' exited with 1\n  GPU 1: ECC") ==
        Lines{"RestartRequested r0 node_left cause=b [a c]", "Admitted d participant r1"});
  s.Join("a");
  const Lines done = s.Join("c");
  CHECK(done.back() == "RoundComplete r1 [a d c] ws=3");
  CHECK(s.LastRound().members[1].node == N("d"));
  const Snapshot st = s.State();
  CHECK(st.unhealthy == 1);
  CHECK(st.max_unhealthy == 1);
  REQUIRE(st.unhealthy_nodes.size() == 1);
  CHECK(st.unhealthy_nodes[0].node == N("b"));
  CHECK(st.unhealthy_nodes[0].report == "health check 'x' exited with 1\n  GPU 1: ECC");
  CHECK_FALSE(st.closed);
}

TEST_CASE("An unhealthy leave is not a close, unlike a normal exit") {
  Script s(WithBudget(1, 2, 1));
  s.Join("a");
  s.Join("b");
  CHECK(s.LeaveUnhealthy("b") == Lines{"RestartRequested r0 node_left cause=b [a]"});
  CHECK(s.Join("a").back() == "RoundComplete r1 [a] ws=1");
  CHECK(s.machine().Tally().unhealthy == 1);
}

TEST_CASE("The default budget is max_nodes - min_nodes") {
  CHECK(MaxUnhealthy(Nodes(2, 5)) == 3);
  CHECK(MaxUnhealthy(Nodes(2, 2)) == 0);
  CHECK(MaxUnhealthy(WithBudget(2, 2, 4)) == 4);
  CHECK_FALSE(ValidateParams(WithBudget(1, 1, -2)).ok());
}

TEST_CASE("Exceeding the unhealthy budget closes the run for every node, later joins are told why") {
  Script s(WithBudget(1, 3, 1));
  s.Join("a");
  s.Join("b");
  s.Join("c");  // full: round 0 at once
  CHECK(s.LeaveUnhealthy("b").size() == 1);  // within the budget: a restart only
  s.Join("a");
  s.Join("c");
  const Lines over = s.LeaveUnhealthy("c", "disk full");
  REQUIRE(over.size() == 2);
  CHECK(over[0] == "RestartRequested r1 node_left cause=c [a]");
  CHECK(over[1] == "Closed r2 [a] unhealthy_budget");
  const Closed closed = s.Latest<Closed>();
  CHECK(closed.unhealthy_budget_exceeded);
  CHECK(closed.message.find("2 nodes left the job as unhealthy") != std::string::npos);
  CHECK(closed.message.find("--max-unhealthy-nodes 1") != std::string::npos);
  CHECK(closed.message.find("disk full") != std::string::npos);
  s.Join("a");
  const Rejected rejected = s.Latest<Rejected>();
  CHECK(rejected.code == RejectCode::kUnhealthyBudget);
  CHECK(ToStatus(rejected).code() == Status::Code::kResourceExhausted);
  CHECK(rejected.message == closed.message);
}

TEST_CASE("A node whose check failed before it ever joined still counts") {
  Script s(WithBudget(2, 2, 0));
  s.Join("a");
  const Lines out = s.LeaveUnhealthy("b", "check failed before join");
  REQUIRE(out.size() == 1);
  CHECK(out[0] == "Closed r0 [a] unhealthy_budget");
  CHECK(s.machine().Tally().unhealthy == 1);
}

TEST_CASE("A spare that fails its check leaves the running round alone") {
  Script s(WithBudget(2, 2, 1));
  s.Join("a");
  s.Join("b");
  s.Join("c");  // spare
  CHECK(s.LeaveUnhealthy("c").empty());
  CHECK(s.State().complete);
  CHECK(s.State().redundant.empty());
  CHECK(s.machine().Tally().unhealthy == 1);
}

TEST_CASE("The unhealthy count and records survive export and import") {
  Script s(WithBudget(1, 2, 5));
  s.Join("a");
  s.Join("b");
  s.LeaveUnhealthy("b", "nic down");
  const MachineState exported = s.machine().Export();
  CHECK(exported.unhealthy == 1);
  RendezvousMachine copy = RendezvousMachine::Import(exported).value();
  CHECK(copy.Export() == exported);
  CHECK(copy.State().unhealthy_nodes.at(0).report == "nic down");
}

TEST_CASE("Only the most recent unhealthy records are kept, the count covers all") {
  Script s(WithBudget(1, 1, 100));
  for (size_t i = 0; i < kUnhealthyKept + 3; ++i) s.LeaveUnhealthy("n" + std::to_string(i));
  CHECK(s.machine().Tally().unhealthy == static_cast<int>(kUnhealthyKept + 3));
  const Snapshot st = s.State();
  REQUIRE(st.unhealthy_nodes.size() == kUnhealthyKept);
  CHECK(st.unhealthy_nodes.front().node == N("n3"));
}

}  // namespace
}  // namespace ctrun::rdzv::testing
