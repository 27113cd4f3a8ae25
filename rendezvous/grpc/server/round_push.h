// RoundPush: one round's RoundComplete, serialized once for all its members.
//
// Every member gets the same RoundComplete (the round, the packed
// local_world_sizes of every member, rank 0's whole member) plus its own
// whole member. The common part is O(members) bytes: built per member, a
// round of N costs O(N^2) bytes of copies and serialization, and as many
// bytes queued at once. RoundPush serializes it once into a shared,
// reference-counted slice; each member's Update is three slices (its own
// field header, the shared part, its own member), so a push to N members is
// O(N) bytes in all.
//
// The bytes parse as exactly the Update that RoundCompleteForPush plus
// AddWholeMember(index) build (protobuf concatenates a message's fields, so
// the shared part and the member's own member make one RoundComplete), and
// reserialize to the same bytes.
//
// Thread model: immutable once built; the ByteBuffers share the slice
// through gRPC's reference counting and may outlive the RoundPush.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>

#include "rendezvous/machine/events.h"

namespace ctrun::rdzv {

class RoundPush {
 public:
  // `round` must outlive the RoundPush.
  RoundPush(const RoundComplete& round, bool store_on_rendezvous_port);

  // The Update{round_complete} for round.members[index]: rank 0's member,
  // then (index > 0) its own.
  grpc::ByteBuffer For(size_t index) const;

 private:
  const RoundComplete& round_;
  grpc::Slice common_;  // RoundComplete without the recipient's own member
};

}  // namespace ctrun::rdzv
