// RendezvousServer with closed_run_ttl (ctrund --closed-run-ttl) over real
// gRPC: a closed run whose nodes all left is forgotten, with everything the
// server kept of it, and its id starts a new run. TTL zero, so no test waits.
#include <catch2/catch.hpp>
#include <filesystem>

#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/rdzv_test_client.h"
#include "tests/temp_dir.h"

namespace ctrun::rdzv {
namespace {

using testing::Expect;
using testing::JoinStreamReader;
using testing::MakeJoin;
using testing::MakeKeepAlive;
using testing::MakeLeave;
using testing::TestClient;

// A state folder of the test's own.
struct ForgetStateDir : ctrun::testing::TempDir {
  ForgetStateDir() : TempDir("ctrun-server-forget") {}
};

std::unique_ptr<RendezvousServer> ForgetDaemon(std::optional<Duration> ttl, const std::string& state_dir = "") {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.mode = RunRegistry::Mode::kAutoCreate;
  options.state_dir = state_dir;
  options.closed_run_ttl = ttl;
  Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  INFO(server.status().message());
  REQUIRE(server.ok());
  return std::move(server).value();
}

// A two-node job of `run_id` from start to end: both join, get the round
// (round `round`), and leave with NORMAL_EXIT (the first closes the run).
void TwoNodeJob(TestClient& client, const std::string& run_id, uint64_t round = 0) {
  const v1::JoinRequest a = MakeJoin(run_id, "node1", 11, 2, 2, "10.0.0.1");
  const v1::JoinRequest b = MakeJoin(run_id, "node2", 22, 2, 2, "10.0.0.2");
  auto sa = client.Join(a);
  auto sb = client.Join(b);
  REQUIRE(Expect(*sa, v1::Update::kAdmitted).admitted().round() == round);
  CHECK(Expect(*sa, v1::Update::kRoundComplete).round_complete().round() == round);
  REQUIRE(sb->NextOf(v1::Update::kRoundComplete));
  v1::KeepAliveRequest report = MakeKeepAlive(a);  // a step report: the run gets a straggler detector
  report.mutable_steps()->set_round(round);
  report.mutable_steps()->set_straggler_factor(2);
  report.mutable_steps()->set_straggler_intervals(3);
  v1::KeepAliveReply reply;
  REQUIRE(client.KeepAlive(report, &reply).ok());
  REQUIRE_FALSE(reply.has_rejected());
  REQUIRE(client.Leave(MakeLeave(a, v1::LeaveRequest::NORMAL_EXIT)).ok());
  REQUIRE(client.Leave(MakeLeave(b, v1::LeaveRequest::NORMAL_EXIT)).ok());
  CHECK(Expect(*sb, v1::Update::kClosed).has_closed());
}

TEST_CASE("with a zero TTL a finished run is forgotten: unknown to its late nodes, its id starts a new run") {
  ForgetStateDir dir;
  auto server = ForgetDaemon(Duration::zero(), dir.path);
  TestClient client(server->port());
  TwoNodeJob(client, "job");

  // A late keep-alive of the old run: the id is unknown now, not closed.
  v1::KeepAliveReply reply;
  REQUIRE(client.KeepAlive(MakeKeepAlive(MakeJoin("job", "node1", 11, 2, 2, "10.0.0.1")), &reply).ok());
  REQUIRE(reply.has_rejected());
  CHECK(reply.rejected().code() == v1::Rejected::UNKNOWN_RUN);
  CHECK(reply.rejected().message().find("--closed-run-ttl") != std::string::npos);
  v1::StateReply state;
  CHECK(client.GetState(testing::MakeState("job"), &state).error_code() == grpc::StatusCode::NOT_FOUND);

  // Its metrics series, run history and state file are gone with it.
  const std::string metrics = server->MetricsText();
  CHECK(metrics.find("run_id=\"job\"") == std::string::npos);
  CHECK(metrics.find("ctrun_runs 0\n") != std::string::npos);
  CHECK(server->RunsJson().find("\"job\"") == std::string::npos);
  CHECK(std::filesystem::is_empty(dir.path));

  // The id is free again: a new job with it runs from round 0, twice.
  TwoNodeJob(client, "job");
  TwoNodeJob(client, "job");
  CHECK(server->MetricsText().find("run_id=\"job\"") == std::string::npos);
}

TEST_CASE("a closed run is kept while its TTL runs, and for ever without one") {
  for (std::optional<Duration> ttl : {std::optional<Duration>(std::chrono::hours(1)), std::optional<Duration>()}) {
    auto server = ForgetDaemon(ttl);
    TestClient client(server->port());
    TwoNodeJob(client, "job");
    auto late = client.Join(MakeJoin("job", "node3", 33, 2, 2, "10.0.0.3"));
    CHECK(Expect(*late, v1::Update::kRejected).rejected().code() == v1::Rejected::CLOSED);
    const std::string metrics = server->MetricsText();
    CHECK(metrics.find("ctrun_closed{run_id=\"job\"} 1") != std::string::npos);
    CHECK(metrics.find("ctrun_rounds_total{run_id=\"job\"} 1") != std::string::npos);
  }
}

TEST_CASE("a closed run whose last member still runs is not forgotten until it leaves") {
  auto server = ForgetDaemon(Duration::zero());
  TestClient client(server->port());
  const v1::JoinRequest a = MakeJoin("job", "node1", 11, 2, 2, "10.0.0.1");
  const v1::JoinRequest b = MakeJoin("job", "node2", 22, 2, 2, "10.0.0.2");
  auto sa = client.Join(a);
  auto sb = client.Join(b);
  REQUIRE(sa->NextOf(v1::Update::kRoundComplete));
  REQUIRE(sb->NextOf(v1::Update::kRoundComplete));
  REQUIRE(client.Leave(MakeLeave(a, v1::LeaveRequest::NORMAL_EXIT)).ok());
  v1::KeepAliveReply reply;
  REQUIRE(client.KeepAlive(MakeKeepAlive(b), &reply).ok());
  CHECK_FALSE(reply.has_rejected());  // b still finishes its workers: the run is closed, not forgotten
  CHECK(server->MetricsText().find("ctrun_closed{run_id=\"job\"} 1") != std::string::npos);
  REQUIRE(client.Leave(MakeLeave(b, v1::LeaveRequest::NORMAL_EXIT)).ok());
  REQUIRE(client.KeepAlive(MakeKeepAlive(b), &reply).ok());
  CHECK(reply.rejected().code() == v1::Rejected::UNKNOWN_RUN);
}

}  // namespace
}  // namespace ctrun::rdzv
