#include "rendezvous/machine/run_registry.h"

#include <catch2/catch.hpp>

namespace ctrun::rdzv {
namespace {

Params Nodes(int min_nodes, int max_nodes) {
  Params p;
  p.min_nodes = min_nodes;
  p.max_nodes = max_nodes;
  return p;
}

TEST_CASE("Fixed mode serves only the runs added") {
  RunRegistry r(RunRegistry::Mode::kFixed);
  REQUIRE(r.Add("job1", Nodes(1, 2)).ok());
  CHECK(r.Find("job1").ok());
  Result<RendezvousMachine*> other = r.FindForJoin("job2", Nodes(1, 2));
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().IsNotFound());
  CHECK(other.status().message() == "--rdzv-id 'job2' is not served here (serving 'job1'): give every node the "
                                    "same --rdzv-id");
}

TEST_CASE("Auto-create mode makes a run on its first join, with that join's params") {
  RunRegistry r(RunRegistry::Mode::kAutoCreate);
  CHECK(r.Find("job").status().IsNotFound());
  // Not "(serving none)", which reads like the default run id `none`.
  CHECK(r.Find("job").status().message() ==
        "--rdzv-id 'job' is not served here (serving no run yet): give every node the same --rdzv-id");
  Result<RendezvousMachine*> m = r.FindForJoin("job", Nodes(2, 3));
  REQUIRE(m.ok());
  CHECK((*m)->params().max_nodes == 3);
  CHECK(r.FindForJoin("job", Nodes(2, 3)).value() == *m);
  CHECK(r.RunIds() == std::vector<std::string>{"job"});
}

TEST_CASE("A join asking for other --nnodes than the run's is refused") {
  RunRegistry r(RunRegistry::Mode::kAutoCreate);
  r.FindForJoin("job", Nodes(2, 3));
  Result<RendezvousMachine*> m = r.FindForJoin("job", Nodes(1, 3));
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message() == "--nnodes '1:3' for run 'job': the run was started with --nnodes '2:3' (give "
                                "every node the same --nnodes)");
}

TEST_CASE("Bad params or an empty run id create nothing") {
  RunRegistry r(RunRegistry::Mode::kAutoCreate);
  CHECK(r.FindForJoin("job", Nodes(3, 2)).status().IsInvalidArgument());
  CHECK(r.FindForJoin("", Nodes(1, 1)).status().IsInvalidArgument());
  CHECK(r.RunIds().empty());
}

TEST_CASE("Runs are independent and pointers survive adding more runs") {
  RunRegistry r(RunRegistry::Mode::kAutoCreate);
  RendezvousMachine* a = r.FindForJoin("a", Nodes(1, 1)).value();
  a->Step(Join{NodeId{"h", 1, 0}, 0, {}, 1, "h"}, TimePoint{});
  for (int i = 0; i < 50; ++i) r.FindForJoin("run" + std::to_string(i), Nodes(1, 1));
  CHECK(r.Find("a").value() == a);
  CHECK(a->State().complete);
  CHECK_FALSE(r.Find("run0").value()->State().complete);
}

TEST_CASE("Remove forgets a run") {
  RunRegistry r(RunRegistry::Mode::kFixed);
  r.Add("a", Nodes(1, 1));
  CHECK(r.Remove("a"));
  CHECK_FALSE(r.Remove("a"));
  CHECK(r.Find("a").status().IsNotFound());
}

TEST_CASE("Adding an existing run is OK with the same --nnodes, refused with others") {
  RunRegistry r(RunRegistry::Mode::kFixed);
  CHECK(r.Add("a", Nodes(1, 2)).ok());
  CHECK(r.Add("a", Nodes(1, 2)).ok());
  CHECK(r.Add("a", Nodes(2, 2)).code() == Status::Code::kFailedPrecondition);
}

}  // namespace
}  // namespace ctrun::rdzv
