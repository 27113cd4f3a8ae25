// FtClient's compact_sources over real gRPC on 127.0.0.1 (port 0): the
// server answers a group that asks for its compact part with that part
// (SyncAnswer.part), and a group that does not with the whole quorum, in
// the same quorum. Every wait is bounded; nothing sleeps.
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/grpc/client/ft_client.h"
#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/client_inbox.h"
#include "tests/rendezvous/grpc/rdzv_test_client.h"

namespace ctrun::rdzv {
namespace {

TEST_CASE("FtClient: compact_sources gets the group's part, 0 the whole quorum, in one quorum") {
  auto server = testing::StartAutoServer();
  testing::Inbox inbox;
  const QuorumParams params{.min_replicas = 3, .max_replicas = 3, .join_timeout = std::chrono::seconds(30),
                            .heartbeat_timeout = std::chrono::seconds(30)};
  std::vector<std::unique_ptr<FtClient>> clients;
  std::vector<std::optional<Result<SyncAnswer>>> answers(3);
  const std::vector<std::string> ids = {"a", "b", "c"};
  for (size_t i = 0; i < ids.size(); ++i) {
    FtClientOptions o{.endpoint = "127.0.0.1:" + std::to_string(server->port()), .run_id = "run", .group = ids[i],
                      .token = "", .tls = {}, .params = params};
    o.compact_sources = i < 2 ? 3 : 0;  // a and b ask for their part, c for the whole quorum
    clients.push_back(std::make_unique<FtClient>(o, inbox.Poster()));
    clients.back()->Sync(SyncCall{.group = "", .committed_step = 0, .address = ids[i] + "|1/2", .ballot = {}}, 0,
                         [&answers, i](const Result<SyncAnswer>& a) { answers[i] = a; });
  }
  REQUIRE(inbox.RunUntil([&] { return answers[0] && answers[1] && answers[2]; }));
  for (auto& a : answers) REQUIRE(a->ok());
  const SyncAnswer& a = **answers[0];
  REQUIRE(a.part);
  CHECK(a.quorum->members.empty());
  CHECK(a.part->rank == 0);
  CHECK(a.part->world == 3);
  REQUIRE(a.part->right);
  CHECK(a.part->right->id == "b");
  CHECK(a.part->right->address == "b|1/2");
  CHECK_FALSE(a.part->heal);
  REQUIRE(a.part->members.size() == 3);
  CHECK(a.part->members[2].id == "c");
  const SyncAnswer& b = **answers[1];
  REQUIRE(b.part);
  CHECK(b.quorum->id == a.quorum->id);
  CHECK(b.part->rank == 1);
  CHECK(b.part->right->id == "c");
  const SyncAnswer& c = **answers[2];
  CHECK_FALSE(c.part);
  CHECK(c.quorum->id == a.quorum->id);
  CHECK(c.quorum->members == a.part->members);
  clients.clear();  // before the server: their calls are done
}

}  // namespace
}  // namespace ctrun::rdzv
