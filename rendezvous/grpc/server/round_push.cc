#include "rendezvous/grpc/server/round_push.h"

#include <string>

#include "rendezvous.pb.h"
#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv {
namespace {

void PutVarint(uint64_t v, std::string& out) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Update.round_complete is field 2, length-delimited: tag (2 << 3) | 2.
constexpr char kRoundCompleteTag = 0x12;

}  // namespace

RoundPush::RoundPush(const RoundComplete& round, bool store_on_rendezvous_port) : round_(round) {
  v1::RoundComplete common;
  RoundCompleteForPush(round, &common);
  common.set_store_on_rendezvous_port(store_on_rendezvous_port);
  common_ = grpc::Slice(common.SerializeAsString());
}

grpc::ByteBuffer RoundPush::For(size_t index) const {
  std::string own;
  if (index > 0) {
    v1::RoundComplete mine;
    AddWholeMember(round_, index, &mine);
    own = mine.SerializeAsString();
  }
  std::string head(1, kRoundCompleteTag);
  PutVarint(common_.size() + own.size(), head);
  const grpc::Slice slices[] = {grpc::Slice(head), common_, grpc::Slice(own)};
  return grpc::ByteBuffer(slices, own.empty() ? 2 : 3);
}

}  // namespace ctrun::rdzv
