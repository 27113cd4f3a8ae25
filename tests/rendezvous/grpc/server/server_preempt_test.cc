// Preemption notices through the gRPC rendezvous over real gRPC on
// 127.0.0.1: the run's first notice is pushed at once on every other node's
// Join stream, exactly once, never to its sender; the refusals are one
// line each. "Nothing else came" is shown by the next update on each stream
// being a known later push (a node joining restarts every member), never by
// waiting. No sleeps.
#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>

#include "rendezvous/grpc/client/client.h"
#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/client_inbox.h"
#include "tests/rendezvous/grpc/rdzv_test_client.h"

namespace ctrun::rdzv {
namespace {

using testing::Expect;
using testing::JoinStreamReader;
using testing::MakeJoin;
using testing::MakePreempt;
using testing::MakeState;
using testing::StartAutoServer;
using testing::TestClient;

TEST_CASE("preempt: the first notice reaches every other node at once, exactly once, the sender none") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  const v1::JoinRequest ja = MakeJoin("job", "a", 1, 3, 4), jb = MakeJoin("job", "b", 2, 3, 4),
                        jc = MakeJoin("job", "c", 3, 3, 4), jd = MakeJoin("job", "d", 4, 3, 4);
  auto a = client.Join(ja);
  auto b = client.Join(jb);
  auto c = client.Join(jc);
  for (JoinStreamReader* s : {a.get(), b.get(), c.get()}) REQUIRE(s->NextOf(v1::Update::kRoundComplete));

  v1::PreemptReply reply;
  REQUIRE(client.Preempt(MakePreempt(jb, 20, "SIGUSR1"), &reply).ok());
  CHECK(reply.first());
  CHECK(reply.pushed() == 2);
  for (JoinStreamReader* s : {a.get(), c.get()}) {
    v1::PreemptNotice n = Expect(*s, v1::Update::kPreemptNotice).preempt_notice();
    CHECK(n.node().addr() == "b");
    CHECK(n.node().pid() == 2);
    CHECK(n.remaining_s() == 20);
    CHECK(n.source() == "SIGUSR1");
  }

  // A second notice, from another node: counted, not pushed again.
  v1::PreemptReply again;
  REQUIRE(client.Preempt(MakePreempt(jc, 15, "SIGTERM"), &again).ok());
  CHECK_FALSE(again.first());
  CHECK(again.pushed() == 0);

  // The next push every member gets is the restart for d's arrival: no
  // second notice came before it, and none ever came to b.
  auto d = client.Join(jd);
  Expect(*d, v1::Update::kAdmitted);
  for (JoinStreamReader* s : {a.get(), b.get(), c.get()}) Expect(*s, v1::Update::kRestartRequested);

  v1::StateReply state;
  REQUIRE(client.GetState(MakeState("job"), &state).ok());
  REQUIRE(state.has_preempt());
  CHECK(state.preempt().node().addr() == "b");
  CHECK(state.preempt().source() == "SIGUSR1");
  CHECK(state.preempt().remaining_s() == 20);
  CHECK(state.preempt().notices() == 2);
  CHECK(state.preempt().age_s() >= 0);
}

TEST_CASE("preempt: a run without a notice has no preempt state") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "a", 1, 1, 1));
  REQUIRE(a->NextOf(v1::Update::kRoundComplete));
  v1::StateReply state;
  REQUIRE(client.GetState(MakeState("job"), &state).ok());
  CHECK_FALSE(state.has_preempt());
}

TEST_CASE("preempt: a wrong token, an unknown run or another version is refused with the usual line") {
  auto server = StartAutoServer("s3cret");
  TestClient client(server->port());
  v1::JoinRequest ja = MakeJoin("job", "a", 1, 2, 2), jb = MakeJoin("job", "b", 2, 2, 2);
  ja.set_token("s3cret");
  jb.set_token("s3cret");
  auto a = client.Join(ja);
  auto b = client.Join(jb);
  for (JoinStreamReader* s : {a.get(), b.get()}) REQUIRE(s->NextOf(v1::Update::kRoundComplete));

  v1::PreemptReply reply;
  v1::PreemptRequest wrong_token = MakePreempt(ja, 20, "SIGTERM");
  wrong_token.set_token("wrong");
  grpc::Status st = client.Preempt(wrong_token, &reply);
  CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(st.error_message().rfind("rendezvous token mismatch: this node's token is not the server's", 0) == 0);
  wrong_token.clear_token();
  CHECK(client.Preempt(wrong_token, &reply).error_code() == grpc::StatusCode::PERMISSION_DENIED);

  v1::PreemptRequest other_run = MakePreempt(ja, 20, "SIGTERM");
  other_run.set_run_id("other");
  CHECK(client.Preempt(other_run, &reply).error_code() == grpc::StatusCode::NOT_FOUND);

  v1::PreemptRequest old = MakePreempt(ja, 20, "SIGTERM");
  old.set_version(v1::PROTOCOL_VERSION_UNSPECIFIED);
  st = client.Preempt(old, &reply);
  CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(st.error_message().find("use the same ctrun version on every node") != std::string::npos);

  // None of them counted: the run was not noticed, and a good notice still goes out.
  v1::StateRequest ask = MakeState("job");
  ask.set_token("s3cret");
  v1::StateReply state;
  REQUIRE(client.GetState(ask, &state).ok());
  CHECK_FALSE(state.has_preempt());
  REQUIRE(client.Preempt(MakePreempt(ja, 20, "SIGTERM"), &reply).ok());
  CHECK(reply.first());
  CHECK(Expect(*b, v1::Update::kPreemptNotice).preempt_notice().node().addr() == "a");
}

TEST_CASE("preempt: a source or remaining_s out of bounds is INVALID_ARGUMENT naming the field") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  const v1::JoinRequest ja = MakeJoin("job", "a", 1, 2, 2), jb = MakeJoin("job", "b", 2, 2, 2);
  auto a = client.Join(ja);
  auto b = client.Join(jb);
  for (JoinStreamReader* s : {a.get(), b.get()}) REQUIRE(s->NextOf(v1::Update::kRoundComplete));

  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    double remaining_s;
    std::string source;
    std::string field;
  };
  const Case cases[] = {
      {20, std::string(65, 'S'), "source"},          {20, "SIG\nTERM", "source"},
      {20, std::string("SIG\0TERM", 8), "source"},   {20, "\xc3\xa9", "source"},
      {0, "SIGTERM", "remaining_s"},                 {-5, "SIGTERM", "remaining_s"},
      {7 * 24 * 3600.0 + 1, "SIGTERM", "remaining_s"}, {inf, "SIGTERM", "remaining_s"},
      {std::nan(""), "SIGTERM", "remaining_s"},
  };
  for (const Case& c : cases) {
    v1::PreemptReply reply;
    const grpc::Status st = client.Preempt(MakePreempt(ja, c.remaining_s, c.source), &reply);
    INFO(c.field << ": " << st.error_message());
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().rfind("preemption notice: " + c.field + " ", 0) == 0);
    CHECK(st.error_message().find('\n') == std::string::npos);
  }
  v1::StateReply state;
  REQUIRE(client.GetState(MakeState("job"), &state).ok());
  CHECK_FALSE(state.has_preempt());

  // At the bounds: 64 printable bytes, 7 days.
  v1::PreemptReply reply;
  REQUIRE(client.Preempt(MakePreempt(ja, 7 * 24 * 3600.0, std::string(64, '~')), &reply).ok());
  CHECK(reply.first());
  v1::PreemptNotice n = Expect(*b, v1::Update::kPreemptNotice).preempt_notice();
  CHECK(n.source() == std::string(64, '~'));
  CHECK(n.remaining_s() == 7 * 24 * 3600.0);
}

using testing::Inbox;

ClientOptions Options(int port, const std::string& host, int64_t pid) {
  ClientOptions o;
  o.endpoint = "127.0.0.1:" + std::to_string(port);
  o.run_id = "job";
  o.node = NodeId{host, pid, 0};
  o.incarnation = static_cast<uint64_t>(pid);
  o.params.min_nodes = 2;
  o.params.max_nodes = 2;
  o.params.last_call_timeout = std::chrono::milliseconds(100);
  return o;
}

TEST_CASE("preempt: RendezvousClient sends a notice and the other client's Join stream delivers it") {
  auto server = StartAutoServer();
  Inbox inbox;
  RendezvousClient a(Options(server->port(), "a", 1), inbox.Poster());
  RendezvousClient b(Options(server->port(), "b", 2), inbox.Poster());
  std::vector<Update> got_a, got_b;
  bool round_a = false, round_b = false;
  a.Join(JoinArgs{}, [&](const Update& u) {
    got_a.push_back(u);
    round_a = round_a || std::holds_alternative<RoundComplete>(u);
  }, [](const Status&) {});
  b.Join(JoinArgs{}, [&](const Update& u) {
    got_b.push_back(u);
    round_b = round_b || std::holds_alternative<RoundComplete>(u);
  }, [](const Status&) {});
  REQUIRE(inbox.RunUntil([&] { return round_a && round_b; }));

  std::optional<Result<RendezvousClient::PreemptSent>> sent;
  a.Preempt(12.5, "SIGTERM", std::chrono::seconds(5),
            [&](const Result<RendezvousClient::PreemptSent>& r) { sent = r; });
  auto notice_of = [](const std::vector<Update>& got) -> const PreemptNotice* {
    for (const Update& u : got) {
      if (const auto* n = std::get_if<PreemptNotice>(&u)) return n;
    }
    return nullptr;
  };
  REQUIRE(inbox.RunUntil([&] { return sent.has_value() && notice_of(got_b) != nullptr; }));
  REQUIRE(sent->ok());
  CHECK((*sent)->first);
  CHECK((*sent)->pushed == 1);
  const PreemptNotice* n = notice_of(got_b);
  CHECK(n->from == (NodeId{"a", 1, 0}));
  CHECK(n->remaining_s == 12.5);
  CHECK(n->source == "SIGTERM");
  CHECK(n->nodes == std::vector<NodeId>{NodeId{"b", 2, 0}});
  CHECK(notice_of(got_a) == nullptr);

  std::optional<Result<RendezvousClient::PreemptSent>> bad;
  b.Preempt(-1, "SIGTERM", std::chrono::seconds(5),
            [&](const Result<RendezvousClient::PreemptSent>& r) { bad = r; });
  REQUIRE(inbox.RunUntil([&] { return bad.has_value(); }));
  CHECK_FALSE(bad->ok());
  CHECK(bad->status().message().find("preemption notice: remaining_s -1") != std::string::npos);
}

}  // namespace
}  // namespace ctrun::rdzv
