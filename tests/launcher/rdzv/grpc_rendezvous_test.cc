// GrpcRendezvous (launcher/rdzv/grpc_rendezvous.h), two handlers of one
// process against an in-process RendezvousServer on 127.0.0.1 (port 0), as
// two agents of one job: a round, a node leaving, a failed node's verdict
// reaching the other through the run's Closed, and the verdict asked of the
// server from the other's failure report. Both handlers share one
// io_context, run by the test's thread: every wait runs its handlers until
// an event has arrived, bounded by a generous deadline; nothing sleeps.
//
// EtcdRendezvous has no such test: it needs a real etcd (EtcdKv speaks
// etcd's gRPC API; there is no in-process etcd), and tests/integration's
// test_rdzv_ha.py (EtcdTest) drives it against etcd members.
#include "launcher/rdzv/grpc_rendezvous.h"

#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/grpc/server/server.h"

namespace ctrun::launcher {
namespace {

using std::chrono_literals::operator""s;
using std::chrono_literals::operator""ms;

constexpr auto kWait = 30s;  // generous: a wait ends at its event, long before this

rdzv::Params TwoNodes() {
  rdzv::Params p;
  p.min_nodes = 2;
  p.max_nodes = 2;
  p.last_call_timeout = 100ms;
  p.join_timeout = 60s;
  p.keep_alive_interval = 1s;
  return p;
}

// One agent's handler and what reached it.
struct Node {
  std::unique_ptr<GrpcRendezvous> rdzv;
  std::optional<Result<Round>> round;
  std::vector<std::string> changes;  // OnChange's whys
  std::optional<std::optional<rdzv::VerdictSummary>> run_failed;  // OnRunFailed's verdict
  bool shut_down = false;
  std::optional<std::optional<rdzv::VerdictSummary>> verdict;  // ResolveVerdict's
};

class TwoAgents {
 public:
  TwoAgents() {
    rdzv::ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.runs.push_back({"job", TwoNodes()});
    Result<std::unique_ptr<rdzv::RendezvousServer>> server = rdzv::RendezvousServer::Start(options);
    REQUIRE(server.ok());
    server_ = std::move(server).value();
    REQUIRE(server_->port() > 0);
    a_ = MakeNode("node-a", 2);
    b_ = MakeNode("node-b", 3);
    for (Node* n : {&a_, &b_}) {
      n->rdzv->OnChange([n](bool, const std::string& why) { n->changes.push_back(why); });
      n->rdzv->OnRunFailed([n](const std::optional<rdzv::VerdictSummary>& v) { n->run_failed = v; });
    }
  }

  ~TwoAgents() {
    a_.rdzv.reset();
    b_.rdzv.reset();
    server_->Shutdown();
  }

  Node& a() { return a_; }
  Node& b() { return b_; }

  // Runs the handlers until `done()`; false when kWait passed first.
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      io_.run_one_for(200ms);  // returns at the next handler
    }
    return true;
  }

  // Both nodes join, until both have their round.
  void JoinBoth() {
    Join(a_);
    Join(b_);
    REQUIRE(RunUntil([&] { return a_.round.has_value() && b_.round.has_value(); }));
    INFO(a_.round->status().message() << " / " << b_.round->status().message());
    REQUIRE(a_.round->ok());
    REQUIRE(b_.round->ok());
  }

  void Join(Node& n) {
    n.round.reset();
    n.rdzv->NextRound([&n](Result<Round> r) { n.round = std::move(r); });
  }

  void Shutdown(Node& n, ShutdownReason reason) {
    n.rdzv->Shutdown(reason, [&n] { n.shut_down = true; });
  }

  void ResolveVerdict(Node& n, std::optional<rdzv::VerdictSummary> local) {
    n.rdzv->ResolveVerdict(std::move(local), [&n](std::optional<rdzv::VerdictSummary> v) { n.verdict = std::move(v); });
  }

 private:
  Node MakeNode(const std::string& addr, int local_world_size) {
    GrpcRendezvousOptions o;
    o.client.endpoint = "127.0.0.1:" + std::to_string(server_->port());
    o.client.run_id = "job";
    o.client.node = rdzv::NodeId{addr, static_cast<int64_t>(getpid()), 0};
    o.client.params = TwoNodes();
    o.local_world_size = local_world_size;
    o.join_timeout = Seconds(60);
    o.close_timeout = Seconds(10);
    Node n;
    n.rdzv = std::make_unique<GrpcRendezvous>(io_, std::move(o), nullptr);
    return n;
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ = boost::asio::make_work_guard(io_);
  std::unique_ptr<rdzv::RendezvousServer> server_;
  Node a_, b_;
};

rdzv::VerdictSummary SegfaultVerdict() {
  rdzv::VerdictSummary v;
  v.cls = rdzv::FailureClass::kSegfault;
  v.rank = 3;
  v.node = "node-b";
  v.host = "host-b";
  v.evidence = "crashed with a segmentation fault";
  v.line = "verdict: rank 3 on host-b crashed with a segmentation fault";
  return v;
}

rdzv::VerdictSummary LostConnection() {
  rdzv::VerdictSummary v;
  v.cls = rdzv::FailureClass::kConnectionError;
  v.line = "verdict: a peer was lost";
  return v;
}

TEST_CASE("grpc rendezvous: two nodes complete one round; each gets its group rank and the world") {
  TwoAgents t;
  t.JoinBoth();
  const Round& a = **t.a().round;
  const Round& b = **t.b().round;
  CHECK(a.round == b.round);
  CHECK(a.run_id == "job");
  CHECK(b.run_id == "job");
  // One rank 0 and one rank 1; the world in group-rank order: 2 then 3 or 3 then 2.
  CHECK(a.group_rank + b.group_rank == 1);
  CHECK(a.local_world_sizes == b.local_world_sizes);
  const std::vector<int> expected = a.group_rank == 0 ? std::vector<int>{2, 3} : std::vector<int>{3, 2};
  CHECK(a.local_world_sizes == expected);
  // Both send their workers to the same master: group rank 0's.
  CHECK(a.master_addr == b.master_addr);
  CHECK(a.master_port == b.master_port);
  CHECK(a.master_port > 0);
  CHECK_FALSE(a.use_agent_store);

  // A job that finished: both leave, and both shutdowns end.
  t.Shutdown(t.a(), ShutdownReason::kSucceeded);
  t.Shutdown(t.b(), ShutdownReason::kSucceeded);
  REQUIRE(t.RunUntil([&] { return t.a().shut_down && t.b().shut_down; }));
  CHECK_FALSE(t.a().run_failed.has_value());
  CHECK_FALSE(t.b().run_failed.has_value());
}

TEST_CASE("grpc rendezvous: a node that leaves (signal) ends its shutdown; the other hears the round change") {
  TwoAgents t;
  t.JoinBoth();
  t.Shutdown(t.b(), ShutdownReason::kSignal);
  REQUIRE(t.RunUntil([&] { return t.b().shut_down && !t.a().changes.empty(); }));
  INFO(t.a().changes.front());
  CHECK(t.a().changes.front().find("node-b") != std::string::npos);
  CHECK(t.a().changes.front().find("left") != std::string::npos);
  CHECK(t.b().changes.empty());  // the leaving node is not told of its own leave
  CHECK_FALSE(t.a().run_failed.has_value());  // a signal closes nothing

  t.Shutdown(t.a(), ShutdownReason::kSignal);
  REQUIRE(t.RunUntil([&] { return t.a().shut_down; }));
}

TEST_CASE("grpc rendezvous: a failed node's verdict reaches the other through the run's close") {
  TwoAgents t;
  t.JoinBoth();
  const rdzv::VerdictSummary verdict = SegfaultVerdict();
  t.b().rdzv->SetFailureVerdict(verdict);
  t.Shutdown(t.b(), ShutdownReason::kFailed);
  REQUIRE(t.RunUntil([&] { return t.b().shut_down && t.a().run_failed.has_value(); }));
  REQUIRE(t.a().run_failed->has_value());
  CHECK(**t.a().run_failed == verdict);

  // The other node's own failures look like consequences (a lost peer): the
  // run's verdict is the failed node's, at once.
  t.ResolveVerdict(t.a(), LostConnection());
  REQUIRE(t.RunUntil([&] { return t.a().verdict.has_value(); }));
  REQUIRE(t.a().verdict->has_value());
  CHECK(**t.a().verdict == verdict);

  // A node whose own failure names a cause keeps its own verdict.
  t.a().verdict.reset();
  rdzv::VerdictSummary own = SegfaultVerdict();
  own.node = "node-a";
  own.host = "host-a";
  own.line = "verdict: rank 0 on host-a crashed with a segmentation fault";
  t.ResolveVerdict(t.a(), own);
  REQUIRE(t.RunUntil([&] { return t.a().verdict.has_value(); }));
  REQUIRE(t.a().verdict->has_value());
  CHECK(**t.a().verdict == own);

  t.Shutdown(t.a(), ShutdownReason::kFailed);
  REQUIRE(t.RunUntil([&] { return t.a().shut_down; }));
}

TEST_CASE("grpc rendezvous: with no verdict pushed, a node asks the server, which has the other's failure report") {
  TwoAgents t;
  t.JoinBoth();
  // node-b reports a segfaulted worker, then leaves on a signal: its Leave
  // waits for the report, so the server has it once the shutdown ends.
  rdzv::WorkerFailureInfo failure;
  failure.rank = 3;
  failure.local_rank = 1;
  failure.signal = 11;  // SIGSEGV
  failure.failed_at_unix_s = 1.7e9;
  failure.pid = 4242;
  failure.runtime_s = 12;
  t.b().rdzv->ReportFailures({(*t.b().round)->round, "host-b", {failure}});
  t.Shutdown(t.b(), ShutdownReason::kSignal);
  REQUIRE(t.RunUntil([&] { return t.b().shut_down; }));
  CHECK_FALSE(t.a().run_failed.has_value());  // the run was not closed: no verdict pushed

  // node-a's own failure is a consequence: it waits kVerdictWait for a
  // Closed verdict, then asks the server, whose reports name the cause.
  t.ResolveVerdict(t.a(), LostConnection());
  REQUIRE(t.RunUntil([&] { return t.a().verdict.has_value(); }));
  REQUIRE(t.a().verdict->has_value());
  const rdzv::VerdictSummary& v = **t.a().verdict;
  INFO(v.line);
  CHECK(v.cls == rdzv::FailureClass::kSegfault);
  CHECK(v.rank == std::optional<int>(3));
  CHECK(v.host == "host-b");

  t.Shutdown(t.a(), ShutdownReason::kSignal);
  REQUIRE(t.RunUntil([&] { return t.a().shut_down; }));
}

}  // namespace
}  // namespace ctrun::launcher
