// QuorumPlan: what one rank of one replica group does with a quorum
// (quorum.h): its replica rank and the replica world size for the
// cross-replica communicator, the store prefix that communicator is built
// under (a fresh one per quorum id, so a rebuilt group never meets the keys
// of an old one), and whether it must heal first and from whom.
//
// Healing: members whose step is below the quorum's max step heal from the
// members at the max step (their state is the same: each committed step was
// committed by all of its quorum alike). The k-th healing member's rank r of
// its group is sent to source (k + r) mod S of the S up-to-date members, so
// the ranks of one group, and several healing groups, spread over the
// sources (torchft's round robin); the other sources follow it in rotation
// order, as alternates for a source that dies mid-transfer.
//
// Pure; free functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "rendezvous/machine/quorum.h"

namespace ctrun::rdzv {

struct QuorumPlan {
  int64_t quorum_id = 0;
  int replica_rank = 0;               // this group's index in the quorum
  int replica_world = 0;              // the quorum's size
  int64_t max_step = 0;               // the step every member trains next from
  std::string store_prefix;           // "ft/q<id>/"
  bool heal = false;                  // this group is behind: fetch the state first
  std::vector<std::string> sources;   // heal: healing-server addresses, the assigned one first

  bool operator==(const QuorumPlan&) const = default;
};

// The plan of rank `group_rank` (>= 0) of group `member_id` in `quorum`.
// NotFound when the group is not in the quorum.
Result<QuorumPlan> PlanFor(const Quorum& quorum, const std::string& member_id, int group_rank);

}  // namespace ctrun::rdzv
