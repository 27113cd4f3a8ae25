// The wire of the healing transfer (heal_server.h, heal_fetch.h): a behind
// worker fetches the state of its local rank from a worker of a group at
// the quorum's max step (docs/fault-tolerance.md, "Healing"). Pure POSIX,
// no torch. Integers are big-endian.
//
// Request, fetcher -> server, kHealRequestBytes: magic "ctrnHEAL", version
// u32, reserved u32 (0), quorum id u64, step u64 (the state wanted is the
// one before that step of that quorum).
//
// Reply header, server -> fetcher, kHealReplyBytes: magic "ctrnHEAL", kind
// u32 (kHealState or kHealRefused), reserved u32 (0), size u64. Then `size`
// bytes: the state, sent in chunks with no framing of their own (the fetcher
// knows the size), or a one-line reason of at most kHealMaxReasonBytes.
// After the state the server closes the connection.
//
// Every header has a fixed size, so nothing a peer sends sizes an
// allocation but the reply's size, which the fetcher checks against its own
// limit before allocating.
//
// Free functions, no state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ctrun::trainer::ft {

inline constexpr std::size_t kHealRequestBytes = 32;
inline constexpr std::size_t kHealReplyBytes = 24;
inline constexpr std::size_t kHealMaxReasonBytes = 512;
inline constexpr uint32_t kHealProtocolVersion = 1;
inline constexpr uint32_t kHealState = 1;
inline constexpr uint32_t kHealRefused = 2;

struct HealRequest {
  int64_t quorum_id = 0;
  int64_t step = 0;
};

struct HealReply {
  uint32_t kind = kHealState;
  uint64_t size = 0;
};

std::array<char, kHealRequestBytes> EncodeHealRequest(const HealRequest& request);
// InvalidArgument, one line: not a heal request (magic), or another version.
Result<HealRequest> DecodeHealRequest(const std::array<char, kHealRequestBytes>& bytes);

std::array<char, kHealReplyBytes> EncodeHealReply(const HealReply& reply);
// InvalidArgument, one line: not a heal reply, an unknown kind, a state
// larger than max_state_bytes, or a reason longer than kHealMaxReasonBytes.
Result<HealReply> DecodeHealReply(const std::array<char, kHealReplyBytes>& bytes, uint64_t max_state_bytes);

// A refusal's header and reason, ready to send: the reason cut to
// kHealMaxReasonBytes, line breaks and other control characters replaced by
// spaces.
std::string EncodeHealRefusal(std::string_view reason);

}  // namespace ctrun::trainer::ft
