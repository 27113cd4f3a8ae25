// FtParts: one fault-tolerance run's held FtSync calls, by replica group and
// part (ft_runs.h has the semantics; docs/fault-tolerance.md the design).
// A group of `parts` nodes sends one call per node, each for its part
// (0..parts-1); a group of one node sends part 0 of 1. FtParts holds each
// part's call and joins the parts into the group's one SyncCall
// (step_sync.h) once every part is held:
//
//  - committed_step: the same in every part, else Assemble is an error
//    (InvalidArgument naming the group and the differing steps);
//  - ballot: none when no part has one; else the first ballot's quorum_id
//    and step (in part order), ok only when every part has a ballot with
//    that same quorum_id and step and every one is ok (a part without one,
//    or with another quorum or step, votes no);
//  - address: the parts' addresses in part order, joined with ';'.
//
// A group of one part assembles to its one call unchanged.
//
// It also keeps each group's node count (`parts`) while the run knows the
// group (FtRuns forgets it when the group is neither counted, watched nor
// held), so every node of a group must give the same count.
//
// Pure: no gRPC, no clock, no threads. Its owner (FtRuns) serialises every
// call. Call ids are the caller's (unique per server).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::rdzv {

inline constexpr int64_t kMaxFtParts = 64;
inline constexpr size_t kMaxFtAssembledAddressBytes = 2048;
inline constexpr char kFtAddressJoin = ';';

class FtParts {
 public:
  // Whether `call` may be held as `part` of `parts` for call.group: parts
  // in 1..kMaxFtParts and part in 0..parts-1 (InvalidArgument), parts equal
  // to the count the group already has (FailedPrecondition naming both),
  // and the joined address within kMaxFtAssembledAddressBytes with the
  // parts already held (InvalidArgument). Does not check the group id or
  // this part's own address bound (FtRuns does).
  Status Check(const SyncCall& call, int64_t part, int64_t parts) const;
  // Holds `call_id` for the part (after a true Check) and records the
  // group's count. Returns the call id it replaced (the part's earlier
  // held call), if any.
  std::optional<uint64_t> Hold(const SyncCall& call, int64_t part, int64_t parts, uint64_t call_id);
  // nullopt while some part of `group` is not held; else the group's one
  // call, or the error when the parts' committed steps differ.
  std::optional<Result<SyncCall>> Assemble(const std::string& group) const;
  // Forgets every held call of `group`; returns their ids in part order.
  std::vector<uint64_t> Take(const std::string& group);
  // Forgets `call_id` if it is still held for `group` (its client went
  // away); the other parts stay held.
  void Drop(const std::string& group, uint64_t call_id);
  // Forgets the group's count (the run no longer knows the group).
  void Forget(const std::string& group) { counts_.erase(group); }

  // The group's node count, when known.
  std::optional<int64_t> parts_of(const std::string& group) const;
  bool holds(const std::string& group) const { return held_.count(group) > 0; }
  bool holds(const std::string& group, int64_t part) const {
    auto it = held_.find(group);
    return it != held_.end() && it->second.count(part) > 0;
  }
  // The calls held, all groups' parts together.
  size_t size() const { return size_; }
  bool empty() const { return held_.empty(); }
  // Groups with some but not all parts held, in group order.
  std::vector<std::string> Partial() const;
  // Every held call id (the server stops).
  void ForEachCall(const std::function<void(uint64_t)>& fn) const;

 private:
  struct Held {
    uint64_t call_id = 0;
    SyncCall call;
  };
  std::map<std::string, std::map<int64_t, Held>> held_;  // group -> part -> call; no empty inner map
  std::map<std::string, int64_t> counts_;                 // group -> parts
  size_t size_ = 0;                                       // calls in held_
};

}  // namespace ctrun::rdzv
