// The fault-tolerance calls (FtSync, FtWatch, FtLeave) over real gRPC on
// 127.0.0.1 (port 0), between RendezvousServer and FtClient. Every wait is
// on a callback with a generous bound; nothing sleeps.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/client/ft_client.h"
#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/rdzv_test_client.h"

namespace ctrun::rdzv {
namespace {

using std::chrono::milliseconds;
using testing::StartAutoServer;
using std::chrono::seconds;

constexpr seconds kWait{20};  // how long a test waits for any one callback

// Values handed over from gRPC's threads (the test's Post runs callbacks
// inline).
template <typename T>
class Inbox {
 public:
  void Put(T v) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(v));
    cv_.notify_all();
  }
  std::optional<T> Take() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kWait, [this] { return !items_.empty(); })) return std::nullopt;
    T v = std::move(items_.front());
    items_.pop_front();
    return v;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

QuorumParams FtServerParams(int min, int max, Duration join = seconds(30)) {
  return QuorumParams{.min_replicas = min, .max_replicas = max, .join_timeout = join,
                      .heartbeat_timeout = seconds(30)};
}

struct Lost {
  std::string group;
  int64_t quorum_id;
  std::string reason;
};

// One replica group's client and what its callbacks delivered.
struct Group {
  Group(int port, const std::string& id, QuorumParams params, const std::string& token = "",
        const std::string& run = "run") {
    FtClientOptions o{.endpoint = "127.0.0.1:" + std::to_string(port), .run_id = run, .group = id, .token = token,
                      .tls = {}, .params = params};
    client = std::make_unique<FtClient>(o, [](std::function<void()> f) { f(); });
  }
  // Node `part` ("n<part>") of a group of `parts` nodes.
  Group(int port, const std::string& id, int part, int parts, QuorumParams params) : part(part) {
    FtClientOptions o{.endpoint = "127.0.0.1:" + std::to_string(port), .run_id = "run", .group = id, .token = "",
                      .tls = {}, .params = params, .parts = parts, .node = "n" + std::to_string(part)};
    client = std::make_unique<FtClient>(o, [](std::function<void()> f) { f(); });
  }
  // Opens the watch and waits until the server holds it.
  void Watch() {
    auto opened = std::make_shared<Inbox<bool>>();
    client->Watch([this](const std::string& g, int64_t q, const std::string& r) { lost.Put(Lost{g, q, r}); },
                  [this](const Status& s) { ends.Put(s); }, [opened] { opened->Put(true); });
    REQUIRE(opened->Take().has_value());
  }
  void Sync(int64_t committed, std::optional<Ballot> ballot = std::nullopt) {
    client->Sync(SyncCall{.group = "ignored", .committed_step = committed, .address = client->options().group + ":9",
                          .ballot = ballot},
                 0, [this](const Result<SyncAnswer>& a) { answers.Put(a); });
  }
  // This node's part of its group's call (address "<group>-<node>:9").
  void SyncPart(int64_t committed) {
    const FtClientOptions& o = client->options();
    client->Sync(SyncCall{.group = "ignored", .committed_step = committed, .address = o.group + "-" + o.node + ":9",
                          .ballot = std::nullopt},
                 part, [this](const Result<SyncAnswer>& a) { answers.Put(a); });
  }
  Result<SyncAnswer> Answer() {
    std::optional<Result<SyncAnswer>> a = answers.Take();
    REQUIRE(a.has_value());
    return *a;
  }
  SyncAnswer Ok() {
    Result<SyncAnswer> a = Answer();
    INFO(a.status().ToString());
    REQUIRE(a.ok());
    return *a;
  }
  Status LeaveNow(const std::string& reason) {
    Inbox<Status> done;
    client->Leave(reason, seconds(10), [&](const Status& s) { done.Put(s); });
    std::optional<Status> s = done.Take();
    REQUIRE(s.has_value());
    return *s;
  }

  int part = 0;
  std::unique_ptr<FtClient> client;
  Inbox<Result<SyncAnswer>> answers;
  Inbox<Lost> lost;
  Inbox<Status> ends;
};

// Three watching groups a, b, c make their first calls: quorum 1.
std::vector<std::unique_ptr<Group>> FormThreeGroups(int port, QuorumParams params = FtServerParams(1, 3)) {
  std::vector<std::unique_ptr<Group>> g;
  for (const char* id : {"c", "a", "b"}) g.push_back(std::make_unique<Group>(port, id, params));
  for (auto& x : g) x->Watch();
  for (auto& x : g) x->Sync(0);
  for (auto& x : g) {
    SyncAnswer a = x->Ok();
    CHECK(a.group == x->client->options().group);
    CHECK_FALSE(a.commit.has_value());
    CHECK(a.quorum->id == 1);
    REQUIRE(a.quorum->members.size() == 3);
    CHECK(a.quorum->members[0].id == "a");
    CHECK(a.quorum->members[1].id == "b");
    CHECK(a.quorum->members[2].id == "c");
    CHECK(a.quorum->rank_of("a") == std::optional<size_t>(0));
  }
  return g;
}

Ballot Ok1() { return Ballot{.quorum_id = 1, .step = 0, .ok = true}; }

TEST_CASE("FtSync: first calls form quorum 1; a step everyone votes for commits on the fast path") {
  auto server = StartAutoServer();
  auto g = FormThreeGroups(server->port());
  for (auto& x : g) x->Sync(0, Ok1());
  for (auto& x : g) {
    SyncAnswer a = x->Ok();
    CHECK(a.commit == std::optional<bool>(true));
    CHECK(a.quorum->id == 1);
    CHECK(a.quorum->max_step() == 1);
  }
}

TEST_CASE("FtSync: one no vote discards the step for all, and the next quorum has a new id") {
  auto server = StartAutoServer();
  auto g = FormThreeGroups(server->port());
  g[0]->Sync(0, Ok1());
  g[1]->Sync(0, Ballot{.quorum_id = 1, .step = 0, .ok = false});
  g[2]->Sync(0, Ok1());
  for (auto& x : g) {
    SyncAnswer a = x->Ok();
    CHECK(a.commit == std::optional<bool>(false));
    CHECK(a.quorum->id == 2);
    CHECK(a.quorum->max_step() == 0);
    CHECK(a.quorum->members.size() == 3);
  }
}

// g[0] is c. The survivors a and b have voted; c goes, by `lose`.
void LoseC(std::vector<std::unique_ptr<Group>>& g, const std::function<void()>& lose, const std::string& reason) {
  g[1]->Sync(0, Ok1());
  g[2]->Sync(0, Ok1());
  lose();
  for (int i : {1, 2}) {
    std::optional<Lost> lost = g[i]->lost.Take();
    REQUIRE(lost.has_value());
    CHECK(lost->group == "c");
    CHECK(lost->quorum_id == 1);
    CHECK(lost->reason == reason);
    SyncAnswer a = g[i]->Ok();
    CHECK(a.commit == std::optional<bool>(false));  // c never voted
    CHECK(a.quorum->id == 2);
    REQUIRE(a.quorum->members.size() == 2);
    CHECK(a.quorum->members[0].id == "a");
    CHECK(a.quorum->members[1].id == "b");
  }
}

TEST_CASE("FtWatch: a group whose client goes away is lost; the others are told and go on without it") {
  auto server = StartAutoServer();
  auto g = FormThreeGroups(server->port());
  LoseC(g, [&] { g[0]->client.reset(); }, "its agent's watch stream ended");
}

TEST_CASE("FtLeave: a group that leaves is lost; it comes back with its lower step") {
  auto server = StartAutoServer();
  auto g = FormThreeGroups(server->port());
  LoseC(g, [&] { REQUIRE(g[0]->LeaveNow("its workers failed").ok()); }, "its workers failed");
  // c asks again at step 0 while a and b go on; it is in a quorum soon.
  g[0]->Sync(0);
  int64_t quorum = 2, step = 0;
  std::optional<SyncAnswer> back;
  for (int round = 0; round < 50 && !back; ++round) {
    g[1]->Sync(step, Ballot{.quorum_id = quorum, .step = step, .ok = true});
    g[2]->Sync(step, Ballot{.quorum_id = quorum, .step = step, .ok = true});
    SyncAnswer a = g[1]->Ok();
    CHECK(*g[2]->Ok().quorum == *a.quorum);
    CHECK(a.commit == std::optional<bool>(true));
    quorum = a.quorum->id;
    step = a.quorum->max_step();
    if (a.quorum->rank_of("c")) back = g[0]->Ok();
  }
  REQUIRE(back.has_value());
  CHECK_FALSE(back->commit.has_value());
  REQUIRE(back->quorum->members.size() == 3);
  CHECK(back->quorum->members[2].id == "c");
  CHECK(back->quorum->members[2].step == 0);
  CHECK(back->quorum->max_step() >= 1);
}

TEST_CASE("FtSync: a second call of a group replaces the held one") {
  auto server = StartAutoServer();
  // MIN 3: both of a's calls are held until c asks, whichever the server
  // sees first.
  Group a(server->port(), "a", FtServerParams(3, 3));
  Group b(server->port(), "b", FtServerParams(3, 3));
  Group c(server->port(), "c", FtServerParams(3, 3));
  a.Sync(0);
  a.Sync(0);
  b.Sync(0);
  Result<SyncAnswer> replaced = a.Answer();
  CHECK(replaced.status().IsAborted());
  CHECK(replaced.status().message().find("replaced") != std::string::npos);
  c.Sync(0);
  SyncAnswer answered = a.Ok();
  CHECK(answered.quorum->members.size() == 3);
  CHECK(*b.Ok().quorum == *answered.quorum);
  CHECK(*c.Ok().quorum == *answered.quorum);
}

TEST_CASE("FtSync: two groups of two nodes form a quorum of 2; one node's watch ending loses its group") {
  auto server = StartAutoServer();
  std::vector<std::unique_ptr<Group>> nodes;  // a's n0, n1, then b's
  for (const char* id : {"a", "b"}) {
    for (int part : {0, 1}) {
      nodes.push_back(std::make_unique<Group>(server->port(), id, part, 2, FtServerParams(2, 2)));
    }
  }
  for (auto& n : nodes) n->Watch();
  for (auto& n : nodes) n->SyncPart(0);
  std::optional<Quorum> quorum;
  for (auto& n : nodes) {
    SyncAnswer a = n->Ok();
    CHECK(a.group == n->client->options().group);
    CHECK_FALSE(a.commit.has_value());
    if (!quorum) quorum = *a.quorum;
    CHECK(*a.quorum == *quorum);  // every node: the same quorum
  }
  CHECK(quorum->id == 1);
  REQUIRE(quorum->members.size() == 2);
  CHECK(quorum->members[0].id == "a");
  CHECK(quorum->members[0].address == "a-n0:9;a-n1:9");
  CHECK(quorum->members[1].address == "b-n0:9;b-n1:9");

  nodes[1]->client.reset();  // a's n1 goes away: group a is lost
  for (int i : {2, 3}) {
    std::optional<Lost> lost = nodes[i]->lost.Take();
    REQUIRE(lost.has_value());
    CHECK(lost->group == "a");
    CHECK(lost->quorum_id == 1);
    CHECK(lost->reason == "its agent's watch stream ended");
  }
  CHECK(nodes[0]->lost.size() == 0);  // a's own node is not told of a's loss
}

TEST_CASE("FtSync: with MIN 2 and a healthy group that does not ask, the quorum forms at the join timeout") {
  auto server = StartAutoServer();
  const QuorumParams params = FtServerParams(2, 3, milliseconds(200));
  Group a(server->port(), "a", params), b(server->port(), "b", params), c(server->port(), "c", params);
  a.Watch();
  b.Watch();
  c.Watch();
  a.Sync(0);
  b.Sync(0);
  SyncAnswer answer = a.Ok();
  CHECK(answer.quorum->members.size() == 2);
  CHECK_FALSE(answer.quorum->rank_of("c").has_value());
  CHECK(*b.Ok().quorum == *answer.quorum);
}

TEST_CASE("Ft calls: bad input is refused with one line, and the server keeps serving") {
  auto server = StartAutoServer("secret");
  const int port = server->port();
  auto refused = [&](Group& g) {
    g.Sync(0);
    Result<SyncAnswer> a = g.Answer();
    REQUIRE_FALSE(a.ok());
    INFO(a.status().ToString());
    CHECK(a.status().message().find('\n') == std::string::npos);
    return a.status();
  };
  {
    Group g(port, std::string(129, 'g'), FtServerParams(1, 2), "secret");
    CHECK(refused(g).IsInvalidArgument());
  }
  {
    Group g(port, "a", FtServerParams(1, 2), "secret");
    g.client->Sync(SyncCall{.group = "a", .committed_step = 0, .address = std::string(1025, 'x'), .ballot = {}},
                   0, [&](const Result<SyncAnswer>& a) { g.answers.Put(a); });
    Result<SyncAnswer> a = g.Answer();
    CHECK(a.status().IsInvalidArgument());
    CHECK(a.status().message().find("1024") != std::string::npos);
  }
  {
    Group g(port, "a", FtServerParams(0, 2), "secret");
    Status s = refused(g);
    CHECK(s.IsInvalidArgument());
    CHECK(s.message().find("min_replicas") != std::string::npos);
  }
  {
    Group g(port, "a", FtServerParams(1, 2), "wrong");
    CHECK(refused(g).code() == Status::Code::kFailedPrecondition);
  }
  {
    Group a(port, "a", FtServerParams(1, 1), "secret", "mismatch");
    a.Sync(0);
    CHECK(a.Ok().quorum->id == 1);
    Group b(port, "b", FtServerParams(1, 2), "secret", "mismatch");
    Status s = refused(b);
    CHECK(s.code() == Status::Code::kFailedPrecondition);
    CHECK(s.message().find("1:1") != std::string::npos);
    CHECK(s.message().find("1:2") != std::string::npos);
  }
  {
    Group g(port, "a", FtServerParams(1, 2), "secret");
    Inbox<Status> done;
    g.client->Leave(std::string(257, 'r'), seconds(10), [&](const Status& s) { done.Put(s); });
    std::optional<Status> s = done.Take();
    REQUIRE(s.has_value());
    CHECK(s->IsInvalidArgument());
  }
  // Still serving.
  Group a(port, "a", FtServerParams(1, 2), "secret", "after");
  a.Sync(0);
  CHECK(a.Ok().quorum->id == 1);
}

TEST_CASE("FtSync: a run takes at most 1024 groups, and the server keeps serving") {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.mode = RunRegistry::Mode::kAutoCreate;
  options.token = "secret";
  options.ft_max_groups = 1024;  // the default is 131072: this test's bound, its message the same
  Result<std::unique_ptr<RendezvousServer>> started = RendezvousServer::Start(options);
  REQUIRE(started.ok());
  auto server = std::move(started).value();
  const int port = server->port();
  // 1024 groups, each answered at once (a heartbeat timeout so short that
  // the earlier ones are never healthy by the next call), then one more.
  auto stub = v1::Rendezvous::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  auto sync = [&](const std::string& group, v1::FtSyncReply* reply) {
    v1::FtSyncRequest req;
    req.set_version(kProtocolVersion);
    req.set_run_id("many");
    req.set_token("secret");
    req.set_group(group);
    req.mutable_params()->set_min_replicas(1);
    req.mutable_params()->set_max_replicas(1);
    req.mutable_params()->set_join_timeout_s(30);
    req.mutable_params()->set_heartbeat_timeout_s(1e-9);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kWait);
    return stub->FtSync(&ctx, req, reply);
  };
  for (int i = 0; i < 1024; ++i) {
    v1::FtSyncReply reply;
    grpc::Status s = sync("g" + std::to_string(i), &reply);
    INFO(i << ": " << s.error_message());
    REQUIRE(s.ok());
  }
  v1::FtSyncReply reply;
  grpc::Status s = sync("one-too-many", &reply);
  CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(s.error_message().find("1024") != std::string::npos);

  Group a(port, "a", FtServerParams(1, 2), "secret", "after");
  a.Sync(0);
  CHECK(a.Ok().quorum->id == 1);
}

}  // namespace
}  // namespace ctrun::rdzv
