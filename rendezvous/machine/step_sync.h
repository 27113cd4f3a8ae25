// StepSync: the per-step call of fault-tolerant training (docs/fault-
// tolerance.md) as pure logic: one QuorumMachine (quorum.h) and the
// StepVote (step_vote.h) of the quorum's current step, joined so that a
// replica group makes ONE call per step. The call carries the group's vote
// on the step it just ran and asks for the quorum of its next step; the
// answer carries the decision on that vote and the next quorum.
//
// A call's vote counts when it is for the current quorum's id and step
// (the step a quorum trains is its max_step, healing members included);
// another ballot (a group that missed a quorum change) counts as no vote.
// A group's request for the next quorum is held until its vote is decided:
// it then asks with its committed step (one more when the step committed).
// A call without a ballot (the group's first, or after it healed) asks at
// once with the step it gives. A discarded step counts as a commit failure:
// the next quorum gets a new id, so the groups rebuild their cross-replica
// communicator (the failure may have been in it). So the fast path holds: the next quorum
// forms once every member's vote is decided and it has asked, with no other
// round trip.
//
// When a quorum forms, every member that asked gets an Answer, and the vote
// of the new quorum's step opens. A Lost group fails the open vote if it had
// not voted, and leaves the quorum (quorum.h).
//
// Pure: no I/O, no clock reads, no threads. One owner serialises every
// call (the rendezvous server, per run).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "rendezvous/machine/quorum.h"
#include "rendezvous/machine/step_vote.h"

namespace ctrun::rdzv {

// A group's vote on the step it ran.
struct Ballot {
  int64_t quorum_id = 0;
  int64_t step = 0;
  bool ok = false;

  bool operator==(const Ballot&) const = default;
};

// One group's per-step call.
struct SyncCall {
  std::string group;
  int64_t committed_step = 0;   // its last committed step before `ballot`
  std::string address;          // its healing server
  std::optional<Ballot> ballot;  // none on its first call or after healing
};

// The answer to one group's call.
struct SyncAnswer {
  std::string group;
  std::optional<bool> commit;  // the decision on its ballot (none: no ballot counted)
  Quorum quorum;               // the quorum it trains its next step in
  // Set by the server (not StepSync) when the run finished at this step
  // before the group asked: commit and quorum are then empty.
  std::optional<int64_t> finished_step = std::nullopt;

  bool operator==(const SyncAnswer&) const = default;
};

class StepSync {
 public:
  explicit StepSync(QuorumParams params) : quorum_(params) {}

  // The group's call (a heartbeat too). A group's second call before its
  // first is answered replaces it.
  void Call(const SyncCall& call, TimePoint now);
  void Heartbeat(const std::string& group, TimePoint now) { quorum_.Heartbeat(group, now); }
  void Lost(const std::string& group, TimePoint now);
  // The answers due at `now` (a quorum formed), in group order; empty when
  // none.
  std::vector<SyncAnswer> Tick(TimePoint now);

  std::optional<TimePoint> NextDeadline(TimePoint now) const { return quorum_.NextDeadline(now); }
  const std::string& reason() const { return quorum_.reason(); }
  const std::optional<Quorum>& last() const { return quorum_.last(); }
  // Groups whose call is not answered yet.
  std::vector<std::string> Pending() const;

 private:
  struct Held {
    SyncCall call;
    std::optional<bool> decision;  // of its ballot, once decided
    bool asked = false;            // its request is in the quorum machine
  };
  // Asks the quorum machine for each held call whose ballot is decided.
  void AskDecided(TimePoint now);

  QuorumMachine quorum_;
  std::optional<StepVote> vote_;  // the current quorum's step
  std::map<std::string, Held> held_;
};

}  // namespace ctrun::rdzv
