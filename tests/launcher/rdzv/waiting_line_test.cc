// The line a joining agent prints while its round forms (launcher/rdzv/waiting_line.h).
#include "launcher/rdzv/waiting_line.h"

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

rdzv::Counts Round(int participants, int min_nodes, int max_nodes) {
  rdzv::Counts c;
  c.participants = participants;
  c.min_nodes = min_nodes;
  c.max_nodes = max_nodes;
  return c;
}

TEST_CASE("WaitingLine: how many more nodes, where, which run, and until when", "[waiting_line]") {
  CHECK(WaitingLine(Round(1, 2, 2), "127.0.0.1:29400", "job5", 589.2, std::nullopt) ==
        "waiting for 1 more node (1/2) at 127.0.0.1:29400, run 'job5'; giving up in 590 s");
  CHECK(WaitingLine(Round(0, 3, 4), "node0:29400", "job5", 12, std::nullopt) ==
        "waiting for 3 more nodes (0/3) at node0:29400, run 'job5'; giving up in 12 s");
  // MIN reached: the last call starts the round with the nodes it has.
  CHECK(WaitingLine(Round(2, 2, 4), "node0:29400", "job5", 500, 24.5) ==
        "waiting for up to 2 more nodes (2/4) at node0:29400, run 'job5'; starting with 2 in 25 s");
  CHECK(WaitingLine(Round(3, 2, 4), "node0:29400", "job5", 500, 1) ==
        "waiting for up to 1 more node (3/4) at node0:29400, run 'job5'; starting with 3 in 1 s");
  // Every node is there, the round not yet announced.
  CHECK(WaitingLine(Round(2, 2, 2), "node0:29400", "job5", 3, std::nullopt) ==
        "waiting for the round to start with 2 nodes at node0:29400, run 'job5'; giving up in 3 s");
  // A deadline already past reads 0, never negative.
  CHECK(WaitingLine(Round(1, 2, 2), "node0:29400", "job5", -4, std::nullopt) ==
        "waiting for 1 more node (1/2) at node0:29400, run 'job5'; giving up in 0 s");
}

}  // namespace
}  // namespace ctrun::launcher
