// The FtSync answer through its proto and back, in both forms: the whole
// quorum, and the group's compact part (with the members only in a quorum
// of at most kCompactMembersMax groups).
#include "rendezvous/grpc/convert/ft_convert.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "rendezvous/machine/quorum_lookup.h"

namespace ctrun::rdzv {
namespace {

std::shared_ptr<const Quorum> FtConvertQuorum(std::mt19937& rng, size_t n) {
  Quorum q{.id = 12, .members = {}};
  for (size_t i = 0; i < n; ++i) {
    const std::string id = "g" + std::to_string(1000 + i);  // sorted by id
    q.members.push_back(QuorumMember{.id = id, .step = i == 0 ? 30 : 28 + static_cast<int64_t>(rng() % 3),
                                     .address = "10.0.0." + std::to_string(i % 250) + "|" +
                                                std::to_string(2000 + 2 * i) + "/" + std::to_string(2001 + 2 * i),
                                     .commit_failures = static_cast<int64_t>(rng() % 2)});
  }
  return std::make_shared<const Quorum>(std::move(q));
}

SyncAnswer ServerAnswer(const std::shared_ptr<const Quorum>& q, const std::string& group,
                        std::shared_ptr<const QuorumLookup> lookup) {
  return SyncAnswer{.group = group, .commit = true, .quorum = q, .finished_step = std::nullopt,
                    .lookup = std::move(lookup)};
}

TEST_CASE("ft convert: a compact answer round-trips as the owned part, with the members iff the quorum has at "
          "most 64") {
  std::mt19937 rng(7);
  for (size_t n : {1, 2, 5, 63, 64, 65, 200}) {
    auto q = FtConvertQuorum(rng, n);
    auto lookup = std::make_shared<const QuorumLookup>(q);
    for (size_t i = 0; i < n; i += 1 + n / 8) {
      const std::string& group = q->members[i].id;
      for (uint32_t sources : {1u, 3u, 1000u}) {
        INFO("n " << n << ", group " << group << ", sources " << sources);
        v1::FtSyncReply reply;
        SyncAnswerToProto(ServerAnswer(q, group, i % 2 ? lookup : nullptr), &reply, sources);
        CHECK(reply.members_size() == 0);
        REQUIRE(reply.has_compact());
        CHECK(reply.compact().members_size() == (n <= kCompactMembersMax ? static_cast<int>(n) : 0));
        const SyncAnswer back = SyncAnswerFromProto(group, reply);
        REQUIRE(back.part);
        CHECK(*back.part == OwnedPart(*lookup->PartOf(group, sources), *q));
        CHECK(back.part->members.empty() == (n > kCompactMembersMax));
        CHECK(back.quorum->id == q->id);
        CHECK(back.quorum->members.empty());
        CHECK(back.commit == std::optional<bool>(true));
        CHECK_FALSE(back.finished_step);
      }
    }
  }
}

TEST_CASE("ft convert: the whole quorum (compact_sources 0, or an older server's reply) has no part") {
  std::mt19937 rng(8);
  auto q = FtConvertQuorum(rng, 5);
  v1::FtSyncReply reply;
  SyncAnswerToProto(ServerAnswer(q, "g1002", nullptr), &reply);
  CHECK_FALSE(reply.has_compact());
  CHECK(reply.members_size() == 5);
  const SyncAnswer back = SyncAnswerFromProto("g1002", reply);
  CHECK_FALSE(back.part);
  CHECK(back == ServerAnswer(q, "g1002", nullptr));
}

TEST_CASE("ft convert: any compact_sources gives no more sources than the members at the max step") {
  std::mt19937 rng(9);
  auto q = FtConvertQuorum(rng, 300);
  const int64_t max_step = q->max_step();
  size_t up_to_date = 0;
  const QuorumMember* behind = nullptr;
  const QuorumMember* ahead = nullptr;
  for (const auto& m : q->members) {
    up_to_date += m.step == max_step ? 1 : 0;
    (m.step < max_step ? behind : ahead) = &m;
  }
  REQUIRE(behind != nullptr);
  REQUIRE(ahead != nullptr);
  REQUIRE(up_to_date < q->members.size());
  const uint32_t hostile = std::numeric_limits<uint32_t>::max();  // 4e9 asked
  v1::FtSyncReply heals;
  SyncAnswerToProto(ServerAnswer(q, behind->id, nullptr), &heals, hostile);
  CHECK(heals.compact().heal());
  CHECK(static_cast<size_t>(heals.compact().sources_size()) == up_to_date);
  CHECK(heals.compact().members_size() == 0);
  v1::FtSyncReply serves;
  SyncAnswerToProto(ServerAnswer(q, ahead->id, nullptr), &serves, hostile);
  CHECK(serves.compact().serve());
  CHECK(serves.compact().sources_size() == 0);
  v1::FtSyncReply whole;
  SyncAnswerToProto(ServerAnswer(q, ahead->id, nullptr), &whole);
  CHECK(serves.ByteSizeLong() < 200);  // a few members' worth, not the whole quorum's
  CHECK(whole.ByteSizeLong() > 300 * 20);
}

TEST_CASE("ft convert: a finished run's answer has no part, whatever was asked") {
  SyncAnswer done{.group = "g1000", .commit = std::nullopt, .quorum = std::make_shared<const Quorum>(),
                  .finished_step = 40};
  v1::FtSyncReply reply;
  SyncAnswerToProto(done, &reply, 5);
  CHECK_FALSE(reply.has_compact());
  const SyncAnswer back = SyncAnswerFromProto("g1000", reply);
  CHECK(back.finished_step == std::optional<int64_t>(40));
  CHECK_FALSE(back.part);
}

}  // namespace
}  // namespace ctrun::rdzv
