// StepVote: whether one step of one quorum is committed (torchft's
// should_commit, decided in one place for all replica groups). Every member
// of the quorum votes after its step's gradient sync: yes when every
// collective of the step succeeded on all its ranks, no otherwise. The step
// commits only when every member voted yes; one no, or a member lost before
// it voted, decides "discard" for all at once, without waiting for the
// rest. Every member then gets the same decision, so the replicas apply or
// discard the step alike and stay equal.
//
// Each call is O(log members) (the yes votes are counted as they come).
//
// Pure; copyable; one owner serialises every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ctrun::rdzv {

class StepVote {
 public:
  StepVote(int64_t quorum_id, int64_t step, const std::vector<std::string>& members);

  // A member's vote. A vote from outside the quorum, or for another quorum
  // id or step, is ignored (returns false); a member's second vote counts
  // only if it is a no.
  bool Vote(const std::string& id, int64_t quorum_id, int64_t step, bool ok);
  // The member is gone: a member that has not voted makes it a discard,
  // and counts as having voted no (it is no longer Pending).
  void Lost(const std::string& id);
  // The member missed the vote (it did not call within the hang time,
  // step_sync.h): a member that has not voted no longer counts, and the
  // step commits when every member left voted yes (none left: discard).
  // The survivors' gradients agree without it: their ring completed.
  void Excuse(const std::string& id);

  // true: commit; false: discard; nullopt: not decided yet.
  std::optional<bool> Decision() const { return decision_; }
  int64_t quorum_id() const { return quorum_id_; }
  int64_t step() const { return step_; }
  // Members that have not voted yet (O(members)), and how many (O(1)).
  std::vector<std::string> Pending() const;
  size_t pending_count() const { return pending_; }

 private:
  // Records `ok` as one member's vote, keeping the counts.
  void Set(std::optional<bool>& vote, bool ok);

  int64_t quorum_id_;
  int64_t step_;
  std::map<std::string, std::optional<bool>> votes_;
  std::optional<bool> decision_;
  size_t pending_ = 0;  // votes_ without a vote
  size_t yes_ = 0;      // votes_ with a yes
};

}  // namespace ctrun::rdzv
