// StragglerDetector: reports in, flags and recoveries out.
#include "rendezvous/machine/straggler.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ctrun::rdzv {
namespace {

using std::chrono::milliseconds;

NodeId N(const std::string& name) { return NodeId{name, 0, 0}; }

// Three nodes, one rank each (rank i on node "n<i>"); k = 1.5, M = 3.
class Job {
 public:
  explicit Job(StragglerParams params = {1.5, 3}) : params_(params) {}

  // Node "n<rank>" reports its rank's interval as its `steps`-th.
  std::vector<StragglerChange> Send(int rank, int ms, uint64_t round = 1) {
    uint64_t& steps = steps_[rank];
    ++steps;
    StepReport r{round, params_, {RankStep{rank, 0, milliseconds(ms), steps}}};
    return detector.Report(N("n" + std::to_string(rank)), r);
  }
  // One report from every rank, rank 0 first; returns every change.
  std::vector<StragglerChange> Round(const std::vector<int>& ms) {
    std::vector<StragglerChange> all;
    for (size_t i = 0; i < ms.size(); ++i) {
      for (StragglerChange& c : Send(static_cast<int>(i), ms[i])) all.push_back(std::move(c));
    }
    return all;
  }

  StragglerDetector detector;

 private:
  StragglerParams params_;
  std::map<int, uint64_t> steps_;
};

TEST_CASE("straggler: median of odd and even counts") {
  std::vector<Duration> none;
  CHECK_FALSE(Median(none));
  std::vector<Duration> odd{milliseconds(300), milliseconds(100), milliseconds(200)};
  CHECK(Median(odd) == milliseconds(200));
  std::vector<Duration> even{milliseconds(400), milliseconds(100), milliseconds(300), milliseconds(200)};
  CHECK(Median(even) == milliseconds(250));
  std::vector<Duration> one{milliseconds(7)};
  CHECK(Median(one) == milliseconds(7));
}

TEST_CASE("straggler: flagged after M consecutive slow reports, not before") {
  Job job;
  CHECK(job.Round({100, 100, 200}).empty());
  CHECK(job.Round({100, 100, 200}).empty());
  std::vector<StragglerChange> third = job.Round({100, 100, 200});
  REQUIRE(third.size() == 1);
  CHECK(third[0].rank == 2);
  CHECK(third[0].node == N("n2"));
  CHECK(third[0].slow);
  CHECK(third[0].step == milliseconds(200));
  CHECK(third[0].job_median == milliseconds(100));
  // Flagged once: further slow reports change nothing.
  CHECK(job.Round({100, 100, 200}).empty());
}

TEST_CASE("straggler: a fast report breaks the streak") {
  Job job;
  job.Round({100, 100, 200});
  job.Round({100, 100, 200});
  job.Round({100, 100, 100});
  CHECK(job.Round({100, 100, 200}).empty());
  CHECK(job.Round({100, 100, 200}).empty());
  CHECK(job.Round({100, 100, 200}).size() == 1);
}

TEST_CASE("straggler: recovers at its first report that is not slow") {
  Job job;
  for (int i = 0; i < 3; ++i) job.Round({100, 100, 200});
  std::vector<StragglerChange> back = job.Round({100, 100, 110});
  REQUIRE(back.size() == 1);
  CHECK(back[0].rank == 2);
  CHECK_FALSE(back[0].slow);
  CHECK(job.Round({100, 100, 110}).empty());
  for (const RankStepView& v : job.detector.Ranks()) CHECK_FALSE(v.straggler);
}

TEST_CASE("straggler: only the slow rank is flagged, and only its node is told") {
  Job job;
  for (int i = 0; i < 5; ++i) job.Round({100, 120, 90, 300, 110});
  CHECK(job.detector.TakeChanges(N("n0")).empty());
  CHECK(job.detector.TakeChanges(N("n1")).empty());
  std::vector<StragglerChange> told = job.detector.TakeChanges(N("n3"));
  REQUIRE(told.size() == 1);
  CHECK(told[0].rank == 3);
  CHECK(job.detector.TakeChanges(N("n3")).empty());  // taken
  for (const RankStepView& v : job.detector.Ranks()) CHECK(v.straggler == (v.rank == 3));
}

TEST_CASE("straggler: exactly k times the median is not slow") {
  Job job({2.0, 1});
  CHECK(job.Round({100, 100, 200}).empty());
  CHECK(job.Round({100, 100, 201}).size() == 1);
}

TEST_CASE("straggler: ranks with no heartbeat are ignored") {
  Job job({1.5, 1});
  // Rank 1 reports nothing; rank 3 reports no interval yet (steps 0).
  StepReport none{1, {1.5, 1}, {RankStep{3, 0, milliseconds(0), 0}}};
  CHECK(job.detector.Report(N("n3"), none).empty());
  job.Send(0, 100);
  std::vector<StragglerChange> c = job.Send(2, 200);
  // Median of {100, 200} = 150: 200 is not above 1.5 x 150.
  CHECK(c.empty());
  REQUIRE(job.detector.JobMedian());
  CHECK(*job.detector.JobMedian() == milliseconds(150));
  CHECK(job.detector.Ranks().size() == 2);
  CHECK_FALSE(job.detector.NodeMedian(N("n1")));
  CHECK_FALSE(job.detector.NodeMedian(N("n3")));
}

TEST_CASE("straggler: a repeated report (same step count) is not a new interval") {
  Job job({1.5, 2});
  job.Round({100, 100, 200});
  StepReport again{1, {1.5, 2}, {RankStep{2, 0, milliseconds(200), 1}}};
  CHECK(job.detector.Report(N("n2"), again).empty());
  CHECK(job.Round({100, 100, 200}).size() == 1);
}

TEST_CASE("straggler: a new round forgets the old one, an old round is ignored") {
  Job job({1.5, 2});
  job.Round({100, 100, 200});
  StepReport next{2, {1.5, 2}, {RankStep{0, 0, milliseconds(100), 1}}};
  job.detector.Report(N("n0"), next);
  CHECK(job.detector.round() == 2);
  CHECK(job.detector.Ranks().size() == 1);
  StepReport stale{1, {1.5, 2}, {RankStep{2, 0, milliseconds(900), 9}}};
  CHECK(job.detector.Report(N("n2"), stale).empty());
  CHECK(job.detector.Ranks().size() == 1);
}

TEST_CASE("straggler: factor 0 never flags") {
  Job off({0, 1});
  for (int i = 0; i < 4; ++i) CHECK(off.Round({100, 100, 300}).empty());
}

TEST_CASE("straggler: node median over the node's ranks") {
  StragglerDetector d;
  StepReport r{1, {}, {RankStep{0, 0, milliseconds(100), 1}, RankStep{1, 1, milliseconds(300), 1},
                       RankStep{2, 2, milliseconds(200), 1}, RankStep{3, 3, milliseconds(400), 1}}};
  d.Report(N("a"), r);
  StepReport s{1, {}, {RankStep{4, 0, milliseconds(1000), 1}}};
  d.Report(N("b"), s);
  CHECK(d.NodeMedian(N("a")) == milliseconds(250));
  CHECK(d.NodeMedian(N("b")) == milliseconds(1000));
  CHECK(d.JobMedian() == milliseconds(300));
}

}  // namespace
}  // namespace ctrun::rdzv
