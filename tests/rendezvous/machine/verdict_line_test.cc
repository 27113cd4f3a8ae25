// The verdict in one line (rendezvous/machine/verdict_line.h): its subject,
// the root's most specific class and evidence, and the consequences' tail.
#include "rendezvous/machine/verdict_line.h"

#include <catch2/catch.hpp>

#include <csignal>

namespace ctrun::rdzv {
namespace {

ReportedFailure Worker(const std::string& host, int rank, double at, const std::string& message = "") {
  ReportedFailure r;
  r.node = NodeId{host, 7, 0};
  r.host = host;
  r.failure.rank = rank;
  r.failure.exit_code = 1;
  r.failure.failed_at_unix_s = at;
  r.failure.error_message = message;
  return r;
}

ReportedFailure Stopped(const std::string& host, int rank, double at) {
  ReportedFailure r = Worker(host, rank, at);
  r.failure.exit_code = 0;
  r.failure.signal = SIGTERM;
  r.failure.stopped_by_agent = true;
  return r;
}

ReportedFailure Node(const std::string& addr, double at, bool lost, const std::string& why) {
  FailureRecord record;
  record.AddNode(NodeId{addr, 9, 0}, 3, lost, why, at, TimePoint{});
  return record.Kept(TimePoint{}).at(0);
}

TEST_CASE("verdict line: an OOM kill, then connection errors on the other ranks") {
  ReportedFailure oom = Worker("gpu-node-2", 5, 100.0);
  oom.failure.exit_code = 0;
  oom.failure.signal = SIGKILL;
  oom.failure.oom_kills_before = 0;
  oom.failure.oom_kills_after = 1;
  oom.failure.max_rss_kib = 24222105;
  std::vector<ReportedFailure> failures = {oom};
  for (int r = 0; r < 7; ++r) {
    failures.push_back(Worker(r < 4 ? "gpu-node-1" : "gpu-node-2", r == 5 ? 7 : r, 100.2,
                              "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer"));
  }
  const std::optional<VerdictSummary> v = SummarizeFailures(failures);
  REQUIRE(v);
  CHECK(v->cls == FailureClass::kOomKilled);
  CHECK(v->rank == 5);
  CHECK(v->host == "gpu-node-2");
  CHECK(v->node == "gpu-node-2#7");
  CHECK(v->evidence == "was killed by the kernel's OOM killer (oom_kill 0->1 in its cgroup, peak RSS 23.1 GiB)");
  CHECK(v->line ==
        "verdict: rank 5 on gpu-node-2 was killed by the kernel's OOM killer (oom_kill 0->1 in its cgroup, peak RSS "
        "23.1 GiB); 7 other ranks failed after it (connection errors)");
}

TEST_CASE("verdict line: the most specific class of a Python exception; mixed consequences are counted") {
  const std::vector<ReportedFailure> failures = {
      Worker("a", 3, 50, "OSError: [Errno 28] No space left on device: '/ckpt/step_100.pt'"),
      Worker("a", 2, 50.3, "RuntimeError: Connection reset by peer"),
      Worker("b", 4, 51, "KeyError: 'x'"),
      Stopped("b", 5, 51.1),
  };
  const std::optional<VerdictSummary> v = SummarizeFailures(failures);
  REQUIRE(v);
  CHECK(v->cls == FailureClass::kDiskFull);
  CHECK(FailureClassName(v->cls) == "disk_full");
  CHECK(v->line ==
        "verdict: rank 3 on a ran out of disk space: OSError: [Errno 28] No space left on device: "
        "'/ckpt/step_100.pt'; 3 other ranks failed after it (1 connection error, 1 other error, 1 stopped by its "
        "agent)");
}

TEST_CASE("verdict line: a lost node is the root of the connection errors it caused, even reported later") {
  const std::vector<ReportedFailure> failures = {
      Worker("a", 0, 200.0, "RuntimeError: Connection closed by peer"),
      Worker("a", 1, 200.1, "RuntimeError: Connection closed by peer"),
      Node("10.0.0.2", 201.5, /*lost=*/true, "its connection dropped with no exit reported"),
  };
  const std::optional<VerdictSummary> v = SummarizeFailures(failures);
  REQUIRE(v);
  CHECK(v->cls == FailureClass::kNodeLost);
  CHECK_FALSE(v->rank);
  CHECK(v->line ==
        "verdict: node 10.0.0.2 was lost: its connection dropped with no exit reported; 2 other ranks failed after it "
        "(connection errors)");
}

TEST_CASE("verdict line: a node that left as unhealthy names its check's report") {
  const std::optional<VerdictSummary> v =
      SummarizeFailures({Node("10.0.0.3", 10, /*lost=*/false, "GPU 3: Xid 79"), Stopped("b", 0, 11)});
  REQUIRE(v);
  CHECK(v->cls == FailureClass::kUnhealthyNode);
  CHECK(v->line == "verdict: node 10.0.0.3 failed its health check: GPU 3: Xid 79; 1 other rank failed after it "
                   "(stopped by its agent)");
  // A node's record among the consequences makes them failures, not ranks.
  const std::optional<VerdictSummary> two = SummarizeFailures(
      {Worker("a", 2, 5, "KeyError: 'x'"), Node("10.0.0.3", 6, /*lost=*/true, "gone"), Stopped("a", 3, 6)});
  REQUIRE(two);
  CHECK(two->line == "verdict: rank 2 on a raised KeyError: 'x'; 2 other failures failed after it (1 other error, 1 "
                     "stopped by its agent)");
}

TEST_CASE("verdict line: only connection errors make one the root, and say so") {
  const std::optional<VerdictSummary> v = SummarizeFailures(
      {Worker("a", 1, 5, "RuntimeError: Connection reset by peer"), Worker("b", 2, 5.2, "Broken pipe")});
  REQUIRE(v);
  CHECK(v->cls == FailureClass::kConnectionError);
  CHECK(v->rank == 1);
}

TEST_CASE("verdict line: every failure stopped by its agent leaves no root, and it never guesses") {
  const std::optional<VerdictSummary> v = SummarizeFailures({Stopped("a", 0, 1), Stopped("a", 1, 1)});
  REQUIRE(v);
  CHECK(v->cls == FailureClass::kStopped);
  CHECK_FALSE(v->rank);
  CHECK(v->line == "verdict: no worker failed on its own: every failure reported was a worker its agent stopped; 2 "
                   "ranks failed (stopped by their agents)");
  CHECK_FALSE(SummarizeFailures({}));
  // An exit with no text and no signal is unknown, and says what was seen.
  ReportedFailure bare = Worker("c", 4, 1);
  bare.failure.exit_code = 3;
  const std::optional<VerdictSummary> unknown = SummarizeFailures({bare});
  REQUIRE(unknown);
  CHECK(unknown->cls == FailureClass::kUnknown);
  CHECK(unknown->line == "verdict: rank 4 on c exited with code 3; no error file and no stderr line");
}

TEST_CASE("verdict line: the evidence of a report reaches the classifier") {
  WorkerFailureInfo f;
  f.signal = SIGKILL;
  f.oom_kills_before = 4;
  f.oom_kills_after = -1;  // unreadable after
  CHECK(ClassifyFailure(EvidenceOf(f)).cls == FailureClass::kKilledBySignal);
  f.oom_kills_after = 5;
  CHECK(ClassifyFailure(EvidenceOf(f)).cls == FailureClass::kOomKilled);
  WorkerFailureInfo hang;
  hang.signal = SIGTERM;
  hang.hung = true;
  hang.hang_frame = "train.py:42 in step";
  CHECK(ClassifyFailure(EvidenceOf(hang)).text == "hung (no heartbeat or step in time), innermost frame train.py:42 in step");
  WorkerFailureInfo exec;
  exec.exit_code = 127;
  exec.exec_failed = true;
  exec.error_message = "cannot run 'train.sh': Permission denied";
  CHECK(ClassifyFailure(EvidenceOf(exec)).cls == FailureClass::kBadLaunch);
}

}  // namespace
}  // namespace ctrun::rdzv
