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

TEST_CASE("A query naming no run gets the only run, or the runs to pick from") {
  RunRegistry r(RunRegistry::Mode::kAutoCreate);
  CHECK(r.OnlyRunId().status().message() == "this server serves no run yet");
  REQUIRE(r.Add("job5", Nodes(1, 2)).ok());
  CHECK(r.OnlyRunId().value() == "job5");
  REQUIRE(r.Add("job2", Nodes(1, 2)).ok());
  CHECK(r.OnlyRunId().status().IsNotFound());
  CHECK(r.OnlyRunId().status().message() == "this server serves 2 runs ('job2', 'job5'): name one with --rdzv-id");
  for (int i = 0; i < 10; ++i) REQUIRE(r.Add("j" + std::to_string(i), Nodes(1, 2)).ok());
  CHECK(r.OnlyRunId().status().message() ==
        "this server serves 12 runs ('j0', 'j1', 'j2', 'j3', 'j4', 'j5', 'j6', 'j7' and 4 more): name one with "
        "--rdzv-id");
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
  CHECK(r.FindForJoin(std::string(129, 'x'), Nodes(1, 1)).status().IsInvalidArgument());
  CHECK(r.FindForJoin(std::string(128, 'x'), Nodes(1, 1)).ok());
  CHECK(r.RunIds().size() == 1);
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

// A one-node run in `r` whose job ended at `t`: joined, closed by its node's
// normal exit (so it is drained too), reported to the registry at `t`.
void RunAndEnd(RunRegistry& r, const std::string& id, TimePoint t) {
  RendezvousMachine* m = r.FindForJoin(id, Nodes(1, 1)).value();
  const NodeId a{"h", 1, 0};
  m->Step(Join{a, 7, {}, 1, "h"}, t);
  r.NoteStepped(id, t);
  REQUIRE(m->Tally().complete);
  m->Step(Leave{a, 7, LeaveReason::kNormalExit}, t);
  REQUIRE(m->Tally().closed);
  REQUIRE(m->Tally().live_nodes == 0);
  r.NoteStepped(id, t);
}

TEST_CASE("A closed, drained run is forgotten its TTL after the step that drained it") {
  const TimePoint t0{};
  RunRegistry r(RunRegistry::Mode::kAutoCreate, std::chrono::seconds(60));
  RunAndEnd(r, "done", t0);
  r.FindForJoin("open", Nodes(1, 2)).value()->Step(Join{NodeId{"x", 1, 0}, 1, {}, 1, "x"}, t0);
  r.NoteStepped("open", t0);  // not closed: no forget time
  CHECK(r.NextForget() == t0 + std::chrono::seconds(60));
  r.NoteStepped("done", t0 + std::chrono::seconds(30));  // a later step does not push it back
  CHECK(r.NextForget() == t0 + std::chrono::seconds(60));

  CHECK(r.ForgetDue(t0 + std::chrono::seconds(59)).empty());
  CHECK(r.Find("done").ok());
  CHECK(r.ForgetDue(t0 + std::chrono::seconds(60)) == std::vector<std::string>{"done"});
  CHECK(r.RunIds() == std::vector<std::string>{"open"});
  CHECK_FALSE(r.NextForget());
  // Unknown now, not closed; and the id starts a new run.
  CHECK(r.Find("done").status().IsNotFound());
  CHECK(r.Find("done").status().message().find("--closed-run-ttl") != std::string::npos);
  Result<RendezvousMachine*> again = r.FindForJoin("done", Nodes(2, 2));
  REQUIRE(again.ok());
  CHECK_FALSE((*again)->Tally().closed);
  CHECK((*again)->Tally().round == 0);
  CHECK((*again)->params().min_nodes == 2);  // the old run's --nnodes no longer binds it
}

TEST_CASE("A closed run is kept while a member of its last round still runs") {
  const TimePoint t0{};
  RunRegistry r(RunRegistry::Mode::kAutoCreate, Duration::zero());
  RendezvousMachine* m = r.FindForJoin("job", Nodes(2, 2)).value();
  const NodeId a{"a", 1, 0}, b{"b", 1, 0};
  m->Step(Join{a, 1, {}, 1, "a"}, t0);
  m->Step(Join{b, 2, {}, 1, "b"}, t0);
  m->Step(Leave{a, 1, LeaveReason::kNormalExit}, t0);  // closes; b still finishing
  r.NoteStepped("job", t0);
  CHECK_FALSE(r.NextForget());
  CHECK(r.ForgetDue(t0 + std::chrono::hours(1)).empty());
  m->Step(Leave{b, 2, LeaveReason::kNormalExit}, t0 + std::chrono::seconds(5));
  r.NoteStepped("job", t0 + std::chrono::seconds(5));
  CHECK(r.NextForget() == t0 + std::chrono::seconds(5));  // TTL 0: due at once
  CHECK(r.ForgetDue(t0 + std::chrono::seconds(5)) == std::vector<std::string>{"job"});
  CHECK(r.size() == 0);
}

TEST_CASE("Without a TTL closed runs are kept; runs are forgotten in time order") {
  const TimePoint t0{};
  RunRegistry keep(RunRegistry::Mode::kFixed);
  keep.Add("a", Nodes(1, 1));
  RunAndEnd(keep, "a", t0);
  CHECK_FALSE(keep.NextForget());
  CHECK(keep.ForgetDue(t0 + std::chrono::hours(24 * 365)).empty());

  RunRegistry r(RunRegistry::Mode::kAutoCreate, std::chrono::seconds(10));
  RunAndEnd(r, "late", t0 + std::chrono::seconds(5));
  RunAndEnd(r, "early", t0);
  RunAndEnd(r, "removed", t0);
  CHECK(r.Remove("removed"));
  CHECK(r.ForgetDue(t0 + std::chrono::seconds(10)) == std::vector<std::string>{"early"});
  CHECK(r.NextForget() == t0 + std::chrono::seconds(15));
  CHECK(r.ForgetDue(t0 + std::chrono::seconds(20)) == std::vector<std::string>{"late"});
  CHECK(r.size() == 0);
}

TEST_CASE("An unknown run's message names at most eight served runs") {
  RunRegistry r(RunRegistry::Mode::kAutoCreate);
  for (int i = 0; i < 20; ++i) r.FindForJoin("run" + std::to_string(i + 10), Nodes(1, 1));
  const std::string message = r.Find("nope").status().message();
  CHECK(message.find("'run17'") != std::string::npos);
  CHECK(message.find("'run18'") == std::string::npos);
  CHECK(message.find("and 12 more") != std::string::npos);
}

}  // namespace
}  // namespace ctrun::rdzv
