// RendezvousServer over real gRPC on 127.0.0.1 (port 0). Every wait is a
// read of a pushed update with a call deadline; nothing sleeps.
#include "rendezvous/grpc/server/server.h"

#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <vector>

#include "tests/rendezvous/grpc/rdzv_test_client.h"

namespace ctrun::rdzv {
namespace {

using testing::Expect;
using testing::JoinStreamReader;
using testing::MakeJoin;
using testing::MakeKeepAlive;
using testing::MakeLeave;
using testing::MakeState;
using testing::TestClient;

std::unique_ptr<RendezvousServer> StartServer(ServerOptions options) {
  options.listen_address = "127.0.0.1:0";
  Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  return std::move(server).value();
}

Params RunParams(int min_nodes, int max_nodes) {
  Params p;
  p.min_nodes = min_nodes;
  p.max_nodes = max_nodes;
  p.last_call_timeout = std::chrono::milliseconds(100);
  return p;
}

std::unique_ptr<RendezvousServer> FixedServer(const std::string& run_id, int min_nodes, int max_nodes) {
  ServerOptions options;
  options.runs.push_back({run_id, RunParams(min_nodes, max_nodes)});
  return StartServer(options);
}

std::unique_ptr<RendezvousServer> AutoServer() {
  ServerOptions options;
  options.mode = RunRegistry::Mode::kAutoCreate;
  return StartServer(options);
}

// The next update, which must be of `kind`.
// The stream ends now, with `code`.
void ExpectEnd(JoinStreamReader& stream, grpc::StatusCode code = grpc::StatusCode::OK) {
  std::optional<v1::Update> u = stream.Next();
  INFO((u ? std::to_string(u->ByteSizeLong()) + " bytes" : std::string("end of stream")));
  REQUIRE_FALSE(u.has_value());
  grpc::Status status = stream.Finish();
  INFO(status.error_message());
  CHECK(status.error_code() == code);
}

// What every member of one round must agree on: round, world size, and the
// local world sizes in group-rank order (run-length coded: size x count).
std::string Shape(const v1::RoundComplete& rc) {
  std::string out = std::to_string(rc.round()) + "/" + std::to_string(rc.world_size());
  for (int i = 0; i < rc.local_world_size_values_size(); ++i) {
    out += " " + std::to_string(rc.local_world_size_values(i)) + "x" + std::to_string(rc.local_world_size_counts(i));
  }
  return out;
}

// How many nodes a round has: the sum of its size list's counts.
int Nodes(const v1::RoundComplete& rc) {
  int nodes = 0;
  for (int count : rc.local_world_size_counts()) nodes += count;
  return nodes;
}

TEST_CASE("two nodes of a 2:2 run both get Admitted, then one round: the master and themselves whole") {
  auto server = FixedServer("job", 2, 2);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 2, 2, "10.0.0.1", 29511));
  CHECK(Expect(*a, v1::Update::kAdmitted).admitted().state() == v1::Admitted::PARTICIPANT);
  auto b = client.Join(MakeJoin("job", "node2", 22, 2, 2, "10.0.0.2", 29522));
  CHECK(Expect(*b, v1::Update::kAdmitted).admitted().state() == v1::Admitted::PARTICIPANT);

  v1::RoundComplete ra = Expect(*a, v1::Update::kRoundComplete).round_complete();
  v1::RoundComplete rb = Expect(*b, v1::Update::kRoundComplete).round_complete();
  CHECK(Shape(ra) == Shape(rb));
  CHECK(Shape(ra) == "0/4 2x2");
  REQUIRE(ra.members_size() == 1);             // node1 is the master: told node2's size only
  CHECK(ra.members(0).node().addr() == "node1");
  CHECK(ra.members(0).group_rank() == 0);
  CHECK(ra.members(0).addr() == "10.0.0.1");
  CHECK(ra.members(0).master_port() == 29511);
  REQUIRE(rb.members_size() == 2);
  CHECK(rb.members(0).addr() == "10.0.0.1");   // everyone is told the master
  CHECK(rb.members(1).node().addr() == "node2");
  CHECK(rb.members(1).group_rank() == 1);
  CHECK(rb.members(1).addr() == "10.0.0.2");
}

TEST_CASE("an empty JoinRequest.addr becomes the IP the request came from") {
  auto server = FixedServer("job", 1, 1);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 1, 1, ""));
  Expect(*a, v1::Update::kAdmitted);
  v1::RoundComplete round = Expect(*a, v1::Update::kRoundComplete).round_complete();
  REQUIRE(round.members_size() == 1);
  CHECK(round.members(0).addr() == "127.0.0.1");
}

TEST_CASE("a third node joining a running 2:3 round restarts the first two (NODE_JOINED)") {
  auto server = FixedServer("job", 2, 3);
  TestClient client(server->port());
  v1::JoinRequest join_c = MakeJoin("job", "node3", 33, 2, 3);
  auto a = client.Join(MakeJoin("job", "node1", 11, 2, 3));
  auto b = client.Join(MakeJoin("job", "node2", 22, 2, 3));
  REQUIRE(a->NextOf(v1::Update::kRoundComplete));  // after the 0.1 s last call
  REQUIRE(b->NextOf(v1::Update::kRoundComplete));

  auto c = client.Join(join_c);
  v1::Admitted admitted = Expect(*c, v1::Update::kAdmitted).admitted();
  CHECK(admitted.state() == v1::Admitted::WAITING);
  CHECK(admitted.round() == 1);
  for (JoinStreamReader* s : {a.get(), b.get()}) {
    v1::RestartRequested r = Expect(*s, v1::Update::kRestartRequested).restart_requested();
    CHECK(r.reason() == v1::RestartRequested::NODE_JOINED);
    CHECK(r.round() == 0);
    CHECK(r.cause().addr() == "node3");
  }
}

TEST_CASE("a member that stops sending keep-alives is evicted and the others get NODE_LOST") {
  ServerOptions options;
  Params params = RunParams(2, 2);
  params.keep_alive_interval = std::chrono::milliseconds(200);
  params.keep_alive_max_attempt = 2;
  options.runs.push_back({"job", params});
  auto server = StartServer(options);
  TestClient client(server->port());
  v1::JoinRequest join_a = MakeJoin("job", "node1", 11, 2, 2);
  v1::JoinRequest join_b = MakeJoin("job", "node2", 22, 2, 2);
  auto a = client.Join(join_a);
  auto b = client.Join(join_b);
  REQUIRE(a->NextOf(v1::Update::kRoundComplete));
  REQUIRE(b->NextOf(v1::Update::kRoundComplete));
  // b was seen last, so a's keep-alive timeout passes first.
  v1::KeepAliveReply reply;
  REQUIRE(client.KeepAlive(MakeKeepAlive(join_b), &reply).ok());
  CHECK_FALSE(reply.has_rejected());

  v1::RestartRequested r = Expect(*b, v1::Update::kRestartRequested).restart_requested();
  CHECK(r.reason() == v1::RestartRequested::NODE_LOST);
  CHECK(r.cause().addr() == "node1");
  CHECK(Expect(*a, v1::Update::kEvicted).evicted().message().find("keep-alive") != std::string::npos);
  ExpectEnd(*a);

  REQUIRE(client.KeepAlive(MakeKeepAlive(join_a), &reply).ok());
  CHECK(reply.rejected().code() == v1::Rejected::UNKNOWN_NODE);
}

TEST_CASE("Leave NORMAL_EXIT closes the run: Closed is pushed, later Joins are Rejected{CLOSED}") {
  auto server = FixedServer("job", 2, 2);
  TestClient client(server->port());
  v1::JoinRequest join_a = MakeJoin("job", "node1", 11, 2, 2);
  auto a = client.Join(join_a);
  auto b = client.Join(MakeJoin("job", "node2", 22, 2, 2));
  REQUIRE(a->NextOf(v1::Update::kRoundComplete));
  REQUIRE(b->NextOf(v1::Update::kRoundComplete));

  REQUIRE(client.Leave(MakeLeave(join_a, v1::LeaveRequest::NORMAL_EXIT)).ok());
  CHECK(Expect(*b, v1::Update::kClosed).closed().round() == 0);
  ExpectEnd(*b);

  auto late = client.Join(MakeJoin("job", "node3", 33, 2, 2));
  CHECK(Expect(*late, v1::Update::kRejected).rejected().code() == v1::Rejected::CLOSED);
  ExpectEnd(*late);

  v1::StateReply state;
  REQUIRE(client.GetState(MakeState("job"), &state).ok());
  CHECK(state.closed());
  CHECK(state.live_nodes() == 1);  // node2 still runs until it leaves too
}

TEST_CASE("auto-create mode serves two run ids at once and refuses another --nnodes") {
  auto server = AutoServer();
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("run-a", "node1", 11, 1, 1));
  auto b = client.Join(MakeJoin("run-b", "node1", 11, 2, 2));
  auto b2 = client.Join(MakeJoin("run-b", "node2", 22, 2, 2));
  CHECK(Nodes(a->NextOf(v1::Update::kRoundComplete)->round_complete()) == 1);
  CHECK(Nodes(b->NextOf(v1::Update::kRoundComplete)->round_complete()) == 2);
  CHECK(Nodes(b2->NextOf(v1::Update::kRoundComplete)->round_complete()) == 2);

  v1::StateReply state;
  REQUIRE(client.GetState(MakeState("run-b"), &state).ok());
  CHECK(state.complete());
  CHECK(state.live_nodes() == 2);
  CHECK(state.max_nodes() == 2);
  CHECK(state.last_call_in_s() < 0);

  auto wrong = client.Join(MakeJoin("run-a", "node9", 99, 1, 4));
  v1::Rejected rejected = Expect(*wrong, v1::Update::kRejected).rejected();
  CHECK(rejected.code() == v1::Rejected::BAD_PARAMS);
  CHECK(rejected.message().find("--nnodes '1:4'") != std::string::npos);
  ExpectEnd(*wrong);
}

TEST_CASE("a fixed server rejects an unknown run id, naming the ones it serves") {
  auto server = FixedServer("job", 1, 1);
  TestClient client(server->port());
  auto s = client.Join(MakeJoin("other", "node1", 11, 1, 1));
  v1::Rejected rejected = Expect(*s, v1::Update::kRejected).rejected();
  CHECK(rejected.code() == v1::Rejected::UNKNOWN_RUN);
  CHECK(rejected.message().find("'job'") != std::string::npos);
  ExpectEnd(*s);

  v1::StateReply state;
  CHECK(client.GetState(MakeState("other"), &state).error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("a wrong or missing token is PERMISSION_DENIED on every RPC") {
  ServerOptions options;
  options.runs.push_back({"job", RunParams(1, 1)});
  options.token = "s3cret";
  auto server = StartServer(options);
  TestClient client(server->port());
  v1::JoinRequest join = MakeJoin("job", "node1", 11, 1, 1);
  join.set_token("wrong");

  auto s = client.Join(join);
  std::optional<v1::Update> none = s->Next();
  CHECK_FALSE(none.has_value());
  grpc::Status status = s->Finish();
  CHECK(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(status.error_message().rfind("rendezvous token mismatch: this node's token is not the server's", 0) == 0);

  v1::KeepAliveReply reply;
  join.clear_token();
  CHECK(client.KeepAlive(MakeKeepAlive(join), &reply).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  v1::StateReply state;
  CHECK(client.GetState(MakeState("job"), &state).error_code() == grpc::StatusCode::PERMISSION_DENIED);

  join.set_token("s3cret");
  auto ok = client.Join(join);
  Expect(*ok, v1::Update::kAdmitted);
}

TEST_CASE("a request of another protocol version is FAILED_PRECONDITION") {
  auto server = FixedServer("job", 1, 1);
  TestClient client(server->port());
  v1::JoinRequest join = MakeJoin("job", "node1", 11, 1, 1);
  join.set_version(static_cast<v1::ProtocolVersion>(2));
  auto s = client.Join(join);
  CHECK_FALSE(s->Next().has_value());
  grpc::Status status = s->Finish();
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(status.error_message() ==
        "rendezvous protocol version 2, this server speaks 3: use the same ctrun version on every node");

  v1::LeaveRequest leave = MakeLeave(join, v1::LeaveRequest::FAILURE);
  leave.set_version(v1::PROTOCOL_VERSION_UNSPECIFIED);
  CHECK(client.Leave(leave).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("a node's newer Join stream replaces its older one, which ends OK") {
  auto server = FixedServer("job", 2, 2);
  TestClient client(server->port());
  v1::JoinRequest join = MakeJoin("job", "node1", 11, 2, 2);
  auto first = client.Join(join);
  Expect(*first, v1::Update::kAdmitted);
  auto second = client.Join(join);
  Expect(*second, v1::Update::kAdmitted);
  ExpectEnd(*first);

  auto b = client.Join(MakeJoin("job", "node2", 22, 2, 2));
  CHECK(second->NextOf(v1::Update::kRoundComplete).has_value());
}

TEST_CASE("a Join of a live node with another incarnation is rejected and leaves its stream alone") {
  auto server = FixedServer("job", 2, 2);
  TestClient client(server->port());
  v1::JoinRequest join = MakeJoin("job", "node1", 11, 2, 2);
  auto first = client.Join(join);
  Expect(*first, v1::Update::kAdmitted);
  join.set_incarnation(join.incarnation() + 1);
  auto impostor = client.Join(join);
  CHECK(Expect(*impostor, v1::Update::kRejected).rejected().code() == v1::Rejected::DUPLICATE_NODE);
  ExpectEnd(*impostor);

  auto b = client.Join(MakeJoin("job", "node2", 22, 2, 2));
  CHECK(first->NextOf(v1::Update::kRoundComplete).has_value());
}

TEST_CASE("a node whose join deadline passes gets TimedOut and its stream ends") {
  ServerOptions options;
  Params params = RunParams(2, 2);
  params.join_timeout = std::chrono::milliseconds(300);
  options.runs.push_back({"job", params});
  auto server = StartServer(options);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 2, 2));
  Expect(*a, v1::Update::kAdmitted);
  CHECK(Expect(*a, v1::Update::kTimedOut).timed_out().message().find("join_timeout") != std::string::npos);
  ExpectEnd(*a);
}

TEST_CASE("a member whose stream drops is taken as gone: the others are told at once") {
  auto server = FixedServer("job", 1, 2);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 1, 2));
  auto b = client.Join(MakeJoin("job", "node2", 22, 1, 2));
  REQUIRE(a->NextOf(v1::Update::kRoundComplete));
  REQUIRE(b->NextOf(v1::Update::kRoundComplete));
  a.reset();  // the client goes away (its agent died): no Leave, no keep-alive timeout needed
  v1::Update restart = Expect(*b, v1::Update::kRestartRequested);
  CHECK(restart.restart_requested().reason() == v1::RestartRequested::NODE_LEFT);
  CHECK(restart.restart_requested().cause().addr() == "node1");
}

TEST_CASE("eight nodes joining at once from eight threads all get the same round") {
  constexpr int kNodes = 8;
  auto server = FixedServer("job", kNodes, kNodes);
  std::vector<std::string> rounds(kNodes);
  std::vector<std::thread> threads;
  for (int i = 0; i < kNodes; ++i) {
    threads.emplace_back([&, i] {
      TestClient client(server->port());
      auto s = client.Join(MakeJoin("job", "node" + std::to_string(i), 100 + i, kNodes, kNodes));
      if (std::optional<v1::Update> u = s->NextOf(v1::Update::kRoundComplete)) {
        int whole = 0;
        for (const v1::Member& m : u->round_complete().members()) whole += m.node().addr() == "node" + std::to_string(i);
        rounds[i] = whole == 1 ? Shape(u->round_complete()) : "node" + std::to_string(i) + " not named once";
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(rounds[0] == "0/16 2x8");
  for (int i = 1; i < kNodes; ++i) CHECK(rounds[i] == rounds[0]);
}

TEST_CASE("Shutdown ends every open Join stream") {
  auto server = FixedServer("job", 2, 2);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 2, 2));
  Expect(*a, v1::Update::kAdmitted);
  server->Shutdown();
  ExpectEnd(*a);
  server->Shutdown();  // idempotent
}

TEST_CASE("listening on a port another server holds fails with Unavailable") {
  auto first = FixedServer("job", 1, 1);
  ServerOptions options;
  options.listen_address = "127.0.0.1:" + std::to_string(first->port());
  Result<std::unique_ptr<RendezvousServer>> second = RendezvousServer::Start(options);
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().IsUnavailable());
  CHECK(second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(first->port()) +
                                       ": address in use") == 0);
}

TEST_CASE("a malformed listen address is InvalidArgument") {
  for (const char* address : {"nohost", "host:", ":80", "host:99999", "::1:80", "host:8x"}) {
    ServerOptions options;
    options.listen_address = address;
    Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
    INFO(address);
    REQUIRE_FALSE(server.ok());
    CHECK(server.status().IsInvalidArgument());
  }
}

}  // namespace
}  // namespace ctrun::rdzv

namespace ctrun::rdzv {
namespace {

TEST_CASE("WhenDrained fires once the last running member has left the closed run") {
  auto server = FixedServer("job", 2, 2);
  TestClient client(server->port());
  v1::JoinRequest join_a = MakeJoin("job", "node1", 11, 2, 2);
  v1::JoinRequest join_b = MakeJoin("job", "node2", 22, 2, 2);
  auto a = client.Join(join_a);
  auto b = client.Join(join_b);
  REQUIRE(a->NextOf(v1::Update::kRoundComplete));
  REQUIRE(b->NextOf(v1::Update::kRoundComplete));

  std::promise<void> drained;
  std::future<void> fired = drained.get_future();
  server->WhenDrained("job", [&drained] { drained.set_value(); });
  REQUIRE(client.Leave(MakeLeave(join_a, v1::LeaveRequest::NORMAL_EXIT)).ok());
  CHECK(fired.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);  // node2 still runs
  REQUIRE(client.Leave(MakeLeave(join_b, v1::LeaveRequest::NORMAL_EXIT)).ok());
  CHECK(fired.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
}

TEST_CASE("GetState with counts_only gives the numbers without the node lists") {
  auto server = FixedServer("job", 3, 3);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 3, 3));
  auto b = client.Join(MakeJoin("job", "node2", 22, 3, 3));
  Expect(*a, v1::Update::kAdmitted);
  Expect(*b, v1::Update::kAdmitted);
  v1::StateRequest request = MakeState("job");
  request.set_counts_only(true);
  v1::StateReply brief;
  REQUIRE(client.GetState(request, &brief).ok());
  CHECK(brief.participant_count() == 2);
  CHECK(brief.participants_size() == 0);
  CHECK(brief.live_nodes() == 2);
  CHECK(brief.max_nodes() == 3);
  v1::StateReply full;
  REQUIRE(client.GetState(MakeState("job"), &full).ok());
  CHECK(full.participants_size() == 2);
  CHECK(full.participant_count() == 2);
}

TEST_CASE("WhenDrained on a run nobody holds fires at once") {
  auto server = FixedServer("job", 2, 2);
  bool fired = false;
  server->WhenDrained("job", [&fired] { fired = true; });
  CHECK(fired);
}

}  // namespace
}  // namespace ctrun::rdzv
