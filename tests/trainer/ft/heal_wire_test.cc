// The healing wire (trainer/ft/heal_wire.h): fixed-size request and reply
// headers round trip; foreign bytes, other versions and sizes beyond the
// limits are refused in one line.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "trainer/ft/heal_wire.h"

namespace ft = ctrun::trainer::ft;

TEST_CASE("heal requests round trip and foreign bytes are refused", "[heal_wire]") {
  const auto bytes = ft::EncodeHealRequest(ft::HealRequest{123456789012, 42});
  auto decoded = ft::DecodeHealRequest(bytes);
  REQUIRE(decoded.ok());
  CHECK(decoded->quorum_id == 123456789012);
  CHECK(decoded->step == 42);

  auto foreign = bytes;
  foreign[0] = 'X';
  auto refused = ft::DecodeHealRequest(foreign);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "its first bytes are not a ctrun heal request");

  auto other_version = bytes;
  other_version[11] = 9;
  refused = ft::DecodeHealRequest(other_version);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("version 9"));
}

TEST_CASE("heal replies are checked against the limits", "[heal_wire]") {
  auto ok = ft::DecodeHealReply(ft::EncodeHealReply(ft::HealReply{ft::kHealState, 1000}), 1000);
  REQUIRE(ok.ok());
  CHECK(ok->kind == ft::kHealState);
  CHECK(ok->size == 1000);

  auto huge = ft::DecodeHealReply(ft::EncodeHealReply(ft::HealReply{ft::kHealState, 1ull << 62}), 1000);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().message() == "it announces a state of 4611686018427387904 bytes, more than the limit of 1000");

  auto long_reason = ft::DecodeHealReply(ft::EncodeHealReply(ft::HealReply{ft::kHealRefused, 513}), 1000);
  REQUIRE_FALSE(long_reason.ok());
  CHECK_THAT(long_reason.status().message(), Catch::Contains("refusal of 513 bytes"));

  auto unknown = ft::DecodeHealReply(ft::EncodeHealReply(ft::HealReply{7, 0}), 1000);
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.status().message(), Catch::Contains("unknown kind 7"));

  auto garbage = ft::EncodeHealReply(ft::HealReply{ft::kHealState, 1});
  std::memset(garbage.data(), 0xff, 8);
  CHECK_FALSE(ft::DecodeHealReply(garbage, 1000).ok());
}

TEST_CASE("a refusal is one line of bounded length", "[heal_wire]") {
  const std::string refusal = ft::EncodeHealRefusal("first\nsecond\r" + std::string(1000, 'x'));
  REQUIRE(refusal.size() == ft::kHealReplyBytes + ft::kHealMaxReasonBytes);
  std::array<char, ft::kHealReplyBytes> header{};
  std::memcpy(header.data(), refusal.data(), header.size());
  auto reply = ft::DecodeHealReply(header, 0);
  REQUIRE(reply.ok());
  CHECK(reply->kind == ft::kHealRefused);
  CHECK(reply->size == ft::kHealMaxReasonBytes);
  CHECK(refusal.substr(ft::kHealReplyBytes, 13) == "first second ");
}
