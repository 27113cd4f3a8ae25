// Invariants every Step result must satisfy, checked by both fuzz targets.
// A violation calls __builtin_trap() so libFuzzer records a crash with the
// input that caused it.
#pragma once

#include <set>
#include <vector>

#include "rendezvous/machine/machine.h"

namespace ctrun::fuzz {

inline void Require(bool ok) {
  if (!ok) __builtin_trap();
}

// RoundComplete: members in rank order, distinct, within [min, max] nodes,
// world size = sum of local world sizes. After a step at `now`, no deadline
// is due any more (else the server's timer would spin).
inline void CheckStep(const rdzv::RendezvousMachine& machine, const std::vector<rdzv::Decision>& decisions,
                      ctrun::TimePoint now) {
  const rdzv::Params& params = machine.params();
  for (const rdzv::Decision& d : decisions) {
    const auto* rc = std::get_if<rdzv::RoundComplete>(&d);
    if (!rc) continue;
    Require(static_cast<int>(rc->members.size()) >= params.min_nodes);
    Require(static_cast<int>(rc->members.size()) <= params.max_nodes);
    long long world = 0;
    std::set<rdzv::NodeId, rdzv::NodeIdLess> seen;
    for (size_t i = 0; i < rc->members.size(); ++i) {
      Require(rc->members[i].group_rank == static_cast<int>(i));
      Require(rc->members[i].local_world_size > 0);
      Require(seen.insert(rc->members[i].node).second);
      world += rc->members[i].local_world_size;
    }
    Require(world == rc->world_size);
  }
  std::optional<ctrun::TimePoint> next = machine.NextDeadline();
  Require(!next || *next > now);
  const rdzv::Counts c = machine.Tally();
  Require(c.participants <= params.max_nodes);
  Require(!c.complete || c.members >= params.min_nodes);
}

}  // namespace ctrun::fuzz
