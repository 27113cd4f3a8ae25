// RendezvousServer with a state dir (ctrund --state-dir) restarted under its
// nodes, and the reconnect Joins of rendezvous/grpc/convert/reconnect.h, over real gRPC.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "rendezvous/grpc/convert/reconnect.h"
#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/rdzv_test_client.h"
#include "tests/temp_dir.h"

namespace ctrun::rdzv {
namespace {

using testing::Expect;
using testing::JoinStreamReader;
using testing::MakeJoin;
using testing::MakeKeepAlive;
using testing::TestClient;

// A state folder of the test's own.
struct StateDir : ctrun::testing::TempDir {
  StateDir() : TempDir("ctrun-server-state") {}
};

std::unique_ptr<RendezvousServer> Daemon(const std::string& state_dir) {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.mode = RunRegistry::Mode::kAutoCreate;
  options.state_dir = state_dir;
  Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  INFO(server.status().message());
  REQUIRE(server.ok());
  return std::move(server).value();
}

// A Join marked as a reconnect (`mode`), as the agent's client sends it.
std::unique_ptr<JoinStreamReader> Rejoin(int port, const v1::JoinRequest& request, Reconnect mode) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  static std::vector<std::unique_ptr<v1::Rendezvous::Stub>> stubs;  // outlive their streams
  stubs.push_back(v1::Rendezvous::NewStub(channel));
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + testing::kCallDeadline);
  context->AddMetadata(kReconnectKey, std::string(ReconnectValue(mode)));
  auto reader = stubs.back()->Join(context.get(), request);
  return std::make_unique<JoinStreamReader>(std::move(context), std::move(reader));
}

TEST_CASE("a restarted server with the same state dir continues the running round") {
  StateDir dir;
  const v1::JoinRequest a = MakeJoin("job", "node1", 11, 2, 2, "10.0.0.1");
  const v1::JoinRequest b = MakeJoin("job", "node2", 22, 2, 2, "10.0.0.2");
  // The streams outlive the first server, as a killed daemon's would: closed
  // first, they would make it record the nodes' leaving before it stops.
  std::unique_ptr<JoinStreamReader> sa, sb;
  {
    auto server = Daemon(dir.path);
    TestClient client(server->port());
    sa = client.Join(a);
    sb = client.Join(b);
    Expect(*sa, v1::Update::kAdmitted);
    Expect(*sa, v1::Update::kRoundComplete);
    Expect(*sb, v1::Update::kAdmitted);
    Expect(*sb, v1::Update::kRoundComplete);
  }
  auto server = Daemon(dir.path);
  auto ra = Rejoin(server->port(), a, Reconnect::kRunning);
  v1::RoundComplete again = Expect(*ra, v1::Update::kRoundComplete).round_complete();
  CHECK(again.round() == 0);
  REQUIRE(again.members_size() == 2);
  CHECK(again.members(0).addr() == "10.0.0.1");
  TestClient client(server->port());
  v1::KeepAliveReply reply;
  REQUIRE(client.KeepAlive(MakeKeepAlive(b), &reply).ok());
  CHECK_FALSE(reply.has_rejected());  // b is still a member: no restart for anyone
}

TEST_CASE("a running node the server does not know is asked to restart") {
  StateDir dir;
  auto server = Daemon(dir.path);
  auto ra = Rejoin(server->port(), MakeJoin("job", "node1", 11, 2, 2), Reconnect::kRunning);
  CHECK(Expect(*ra, v1::Update::kRestartRequested).restart_requested().reason() == v1::RestartRequested::NODE_LEFT);
}

TEST_CASE("a waiting node's reconnect is an ordinary join") {
  StateDir dir;
  auto server = Daemon(dir.path);
  auto ra = Rejoin(server->port(), MakeJoin("job", "node1", 11, 2, 2), Reconnect::kJoining);
  CHECK(Expect(*ra, v1::Update::kAdmitted).admitted().state() == v1::Admitted::PARTICIPANT);
}

TEST_CASE("a running node's reconnect that arrives after its new Join is dropped") {
  StateDir dir;
  auto server = Daemon(dir.path);
  TestClient client(server->port());
  const v1::JoinRequest a = MakeJoin("job", "node1", 11, 2, 2);
  auto fresh = client.Join(a);
  Expect(*fresh, v1::Update::kAdmitted);
  auto stale = Rejoin(server->port(), a, Reconnect::kRunning);
  CHECK_FALSE(stale->Next().has_value());
  CHECK(stale->Finish().ok());
}

TEST_CASE("a state file that is not a run state stops the start, naming the file") {
  StateDir dir;
  std::ofstream(dir.path + "/job.run") << "garbage";
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.mode = RunRegistry::Mode::kAutoCreate;
  options.state_dir = dir.path;
  Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  REQUIRE(server.status().IsInvalidArgument());
  CHECK_THAT(server.status().message(), Catch::StartsWith("state file " + dir.path + "/job.run: "));
}

}  // namespace
}  // namespace ctrun::rdzv
