// QuorumLookup: one formed quorum (quorum.h) indexed once, so that each
// member's own part of it, the compact answer of FtSync
// (proto/rendezvous.proto, FtCompact), is found in O(log N) instead of
// sending every member the whole member list (at 16k groups, 16k members to
// each of 16k groups per step).
//
// A member's compact part: its rank (its index in the quorum), the world
// size, the max step, its ring neighbour (the member after it, wrapping;
// none in a quorum of one), whether it heals (its step is below the max
// step), whether it serves (it is at the max step and some member heals),
// and its heal sources: the up-to-date members in the rotation PlanFor
// (quorum_plan.h) gives the group's rank 0, the assigned one first, cut to
// the number asked. Rank r of the group takes sources[r] first when r is
// below that number: the rotation PlanFor gives rank r.
//
// The client keeps a part as a QuorumPart: copies of its members, and the
// whole quorum's members too when it is small (kCompactMembersMax: the
// agent's events list them).
//
// Pure; immutable once built (shared by every answer of one quorum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rendezvous/machine/quorum.h"

namespace ctrun::rdzv {

struct CompactPart {
  int rank = 0;
  int world = 0;
  int64_t max_step = 0;
  const QuorumMember* right = nullptr;  // null in a quorum of one
  bool heal = false;
  bool serve = false;
  std::vector<const QuorumMember*> sources;  // heal: at most the number asked

  bool operator==(const CompactPart&) const = default;
};

// The most members a compact answer lists beside the part
// (FtCompact.members): above it the list is left out, so an answer's size
// does not grow with the quorum's.
inline constexpr size_t kCompactMembersMax = 64;

// A member's compact part as a client holds it: the fields of CompactPart,
// copied, and `members`, the whole quorum (by id) when it has at most
// kCompactMembersMax members, else empty.
struct QuorumPart {
  int rank = 0;
  int world = 0;
  int64_t max_step = 0;
  std::optional<QuorumMember> right;  // none in a quorum of one
  bool heal = false;
  bool serve = false;
  std::vector<QuorumMember> sources;  // heal: PlanFor's rotation for the group's rank 0, cut
  std::vector<QuorumMember> members;  // the whole quorum, or empty above kCompactMembersMax

  bool operator==(const QuorumPart&) const = default;
};

// `part` of `quorum` (the quorum it points into) copied, with the members
// when quorum has at most kCompactMembersMax of them. O(sources + members).
QuorumPart OwnedPart(const CompactPart& part, const Quorum& quorum);

class QuorumLookup {
 public:
  // O(N) in the members.
  explicit QuorumLookup(std::shared_ptr<const Quorum> quorum);

  const Quorum& quorum() const { return *quorum_; }
  // The member's part with at most `max_sources` heal sources (pointing
  // into quorum()); nullopt when `member_id` is not a member.
  std::optional<CompactPart> PartOf(const std::string& member_id, size_t max_sources) const;

 private:
  std::shared_ptr<const Quorum> quorum_;
  std::unordered_map<std::string_view, size_t> rank_;  // views of quorum_'s ids
  std::vector<size_t> up_to_date_;                     // ranks at the max step
  std::vector<size_t> healing_index_;                  // per rank: its index among the healing members
  int64_t max_step_ = 0;
};

}  // namespace ctrun::rdzv
