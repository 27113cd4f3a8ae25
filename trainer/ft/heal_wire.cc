#include "trainer/ft/heal_wire.h"

#include <endian.h>

#include <cstring>

namespace ctrun::trainer::ft {
namespace {

constexpr char kHealMagic[8] = {'c', 't', 'r', 'n', 'H', 'E', 'A', 'L'};

void HealPut32(char* out, uint32_t value) {
  value = htobe32(value);
  std::memcpy(out, &value, sizeof(value));
}

void HealPut64(char* out, uint64_t value) {
  value = htobe64(value);
  std::memcpy(out, &value, sizeof(value));
}

uint32_t HealGet32(const char* in) {
  uint32_t value = 0;
  std::memcpy(&value, in, sizeof(value));
  return be32toh(value);
}

uint64_t HealGet64(const char* in) {
  uint64_t value = 0;
  std::memcpy(&value, in, sizeof(value));
  return be64toh(value);
}

}  // namespace

std::array<char, kHealRequestBytes> EncodeHealRequest(const HealRequest& request) {
  std::array<char, kHealRequestBytes> out{};
  std::memcpy(out.data(), kHealMagic, sizeof(kHealMagic));
  HealPut32(out.data() + 8, kHealProtocolVersion);
  HealPut32(out.data() + 12, 0);
  HealPut64(out.data() + 16, static_cast<uint64_t>(request.quorum_id));
  HealPut64(out.data() + 24, static_cast<uint64_t>(request.step));
  return out;
}

Result<HealRequest> DecodeHealRequest(const std::array<char, kHealRequestBytes>& bytes) {
  if (std::memcmp(bytes.data(), kHealMagic, sizeof(kHealMagic)) != 0) {
    return Status::InvalidArgument("its first bytes are not a ctrun heal request");
  }
  const uint32_t version = HealGet32(bytes.data() + 8);
  if (version != kHealProtocolVersion) {
    return Status::InvalidArgument("it speaks heal protocol version " + std::to_string(version) + ", this worker " +
                                   std::to_string(kHealProtocolVersion));
  }
  return HealRequest{static_cast<int64_t>(HealGet64(bytes.data() + 16)),
                     static_cast<int64_t>(HealGet64(bytes.data() + 24))};
}

std::array<char, kHealReplyBytes> EncodeHealReply(const HealReply& reply) {
  std::array<char, kHealReplyBytes> out{};
  std::memcpy(out.data(), kHealMagic, sizeof(kHealMagic));
  HealPut32(out.data() + 8, reply.kind);
  HealPut32(out.data() + 12, 0);
  HealPut64(out.data() + 16, reply.size);
  return out;
}

Result<HealReply> DecodeHealReply(const std::array<char, kHealReplyBytes>& bytes, uint64_t max_state_bytes) {
  if (std::memcmp(bytes.data(), kHealMagic, sizeof(kHealMagic)) != 0) {
    return Status::InvalidArgument("its first bytes are not a ctrun heal reply");
  }
  const HealReply reply{HealGet32(bytes.data() + 8), HealGet64(bytes.data() + 16)};
  if (reply.kind == kHealState && reply.size > max_state_bytes) {
    return Status::InvalidArgument("it announces a state of " + std::to_string(reply.size) +
                                   " bytes, more than the limit of " + std::to_string(max_state_bytes));
  }
  if (reply.kind == kHealRefused && reply.size > kHealMaxReasonBytes) {
    return Status::InvalidArgument("it announces a refusal of " + std::to_string(reply.size) +
                                   " bytes, more than the limit of " + std::to_string(kHealMaxReasonBytes));
  }
  if (reply.kind != kHealState && reply.kind != kHealRefused) {
    return Status::InvalidArgument("its reply is of unknown kind " + std::to_string(reply.kind));
  }
  return reply;
}

std::string EncodeHealRefusal(std::string_view reason) {
  std::string text(reason.substr(0, kHealMaxReasonBytes));
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  const auto header = EncodeHealReply(HealReply{kHealRefused, text.size()});
  return std::string(header.data(), header.size()) + text;
}

}  // namespace ctrun::trainer::ft
