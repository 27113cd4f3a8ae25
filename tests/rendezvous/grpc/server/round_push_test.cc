#include "rendezvous/grpc/server/round_push.h"

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv {
namespace {

RoundComplete Round(int n) {
  RoundComplete round{7, {}, 0, false, "hint note"};
  for (int i = 0; i < n; ++i) {
    round.members.push_back(
        Member{NodeId{"host" + std::to_string(i), 100 + i, 0}, i, 1 + i % 3, "10.0.0." + std::to_string(i), 29500 + i});
    round.world_size += 1 + i % 3;
  }
  return round;
}

// What the server sent before RoundPush: one message built per member.
std::string Typed(const RoundComplete& round, size_t index, bool store) {
  v1::Update u;
  RoundCompleteForPush(round, u.mutable_round_complete());
  u.mutable_round_complete()->set_store_on_rendezvous_port(store);
  if (index > 0) AddWholeMember(round, index, u.mutable_round_complete());
  return u.SerializeAsString();
}

v1::Update Parse(grpc::ByteBuffer bytes) {
  v1::Update u;
  REQUIRE(grpc::SerializationTraits<v1::Update>::Deserialize(&bytes, &u).ok());
  return u;
}

TEST_CASE("RoundPush's bytes are the Update each member got before, built once") {
  for (int n : {1, 2, 5, 300}) {
    const RoundComplete round = Round(n);
    for (bool store : {false, true}) {
      const RoundPush push(round, store);
      for (int i = 0; i < n; ++i) {
        INFO("n " << n << " member " << i << " store " << store);
        const v1::Update u = Parse(push.For(static_cast<size_t>(i)));
        CHECK(u.SerializeAsString() == Typed(round, static_cast<size_t>(i), store));
        // The member finds rank 0 first, then itself, as the client reads them.
        const Decision d = DecisionFromUpdate(round.members[static_cast<size_t>(i)].node, u);
        const RoundComplete& got = std::get<RoundComplete>(d);
        CHECK(got.round == 7);
        CHECK(got.world_size == round.world_size);
        CHECK(got.members.size() == static_cast<size_t>(n));
        CHECK(got.members[0].addr == "10.0.0.0");
        CHECK(got.members[static_cast<size_t>(i)].node == round.members[static_cast<size_t>(i)].node);
        CHECK(got.members[static_cast<size_t>(i)].master_port == 29500 + i);
      }
    }
  }
}

TEST_CASE("RoundPush shares one copy of the common part between members") {
  const RoundComplete round = Round(1000);
  const RoundPush push(round, true);
  grpc::ByteBuffer a = push.For(3), b = push.For(999);
  std::vector<grpc::Slice> sa, sb;
  REQUIRE(a.Dump(&sa).ok());
  REQUIRE(b.Dump(&sb).ok());
  REQUIRE(sa.size() == 3);
  REQUIRE(sb.size() == 3);
  CHECK(sa[1].begin() == sb[1].begin());  // the same bytes, not a copy
  CHECK(sa[1].size() > 1000);             // every member's local_world_size
  CHECK(sa[2].size() < 100);              // the recipient's own member
}

}  // namespace
}  // namespace ctrun::rdzv
