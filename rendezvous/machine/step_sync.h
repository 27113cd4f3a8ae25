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
// A hung or slow group must not hold the others (a stopped process, a
// partitioned host, a group at a third of its speed: its agent is alive, so
// it is not Lost). The pace: the median time between quorums of the last
// kPaceSteps steady steps (the same quorum id twice running). The hang
// time: half the pace, at least kMinHangTime, at most the join timeout
// (none until kPaceSteps/4 steady steps were seen: a member is then waited
// for as long as it is alive).
//  - A member of the open vote that has not called within the hang time of
//    the first counted ballot is excused from the vote (step_vote.h: the
//    step commits when every other member voted yes) and benched (quorum.h):
//    the next quorum forms without it, at once.
//  - A no ballot that says `late` (a rank of the group reached the step's
//    cross-group collective past the time its peers wait there: it held
//    them up, and they gave up) benches its group.
// A run in progress met by a fresh machine (ctrund restarted, or a run it
// forgot): its first call shows a committed step or a ballot. The groups'
// calls come back one by one as they reconnect, and a group that was behind
// (benched, cut off) must not form a quorum alone and train steps the
// others committed: the first quorum waits kResumeGrace after that call
// (a reconnect takes well under a second: channel_backoff.h), then forms
// from the groups asking; a group heard (its watch) but not asking by then
// (a stopped process) is benched, not waited for. The ones behind heal.
// The grace ends early once the last quorum is back: as many groups as a
// ballot's `world` called with ballots of its quorum id (the highest seen),
// so a restarted server loses no more than the step in flight.
//
// A group is benched for kMinBench or 10 paces, whichever is longer,
// doubled for each bench since it last took part in kCleanSteps committed
// steps (at most kMaxBench): a group that stays slow is tried again less
// and less often. Its call is held meanwhile; then it joins as any
// newcomer and heals.
//
// Cost: a call is O(log N) in the groups N; a decision O(N) once; a
// quorum forming O(N log N) once, its answers sharing one quorum and one
// QuorumLookup (quorum_lookup.h).
//
// Pure: no I/O, no clock reads, no threads. One owner serialises every
// call (the rendezvous server, per run).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "rendezvous/machine/quorum.h"
#include "rendezvous/machine/quorum_lookup.h"
#include "rendezvous/machine/step_vote.h"

namespace ctrun::rdzv {

// A group's vote on the step it ran.
struct Ballot {
  int64_t quorum_id = 0;
  int64_t step = 0;
  bool ok = false;
  // No, and the group came late: a rank of it reached the step's
  // cross-group collective past the time its peers wait for it there.
  bool late = false;
  // The groups of the quorum it voted in (0: not known): see the resume.
  int world = 0;

  bool operator==(const Ballot&) const = default;
};

// One group's per-step call.
struct SyncCall {
  std::string group;
  int64_t committed_step = 0;   // its last committed step before `ballot`
  std::string address;          // its healing server
  std::optional<Ballot> ballot;  // none on its first call or after healing
};

// The answer to one group's call. Every answer of one quorum shares that
// quorum and its lookup (never null for `quorum`; `lookup` is null only in
// answers StepSync did not make).
struct SyncAnswer {
  std::string group;
  std::optional<bool> commit;  // the decision on its ballot (none: no ballot counted)
  // The quorum it trains its next step in.
  std::shared_ptr<const Quorum> quorum = std::make_shared<const Quorum>();
  // Set by the server (not StepSync) when the run finished at this step
  // before the group asked: commit and quorum are then empty.
  std::optional<int64_t> finished_step = std::nullopt;
  std::shared_ptr<const QuorumLookup> lookup = nullptr;  // the quorum indexed, for compact answers
  // Set by a client (FtClient) when the server answered compactly: the
  // group's own part, and `quorum` then holds the id and no members. Never
  // set by StepSync.
  std::optional<QuorumPart> part = std::nullopt;

  // Equal group, commit, quorum (by value), finished_step and part.
  bool operator==(const SyncAnswer& o) const {
    return group == o.group && commit == o.commit && *quorum == *o.quorum && finished_step == o.finished_step &&
           part == o.part;
  }
};

inline constexpr size_t kPaceSteps = 16;
inline constexpr Duration kMinHangTime = std::chrono::milliseconds(100);
inline constexpr Duration kMinBench = std::chrono::seconds(1);
inline constexpr Duration kMaxBench = std::chrono::seconds(60);
inline constexpr int64_t kCleanSteps = 20;
inline constexpr Duration kResumeGrace = std::chrono::seconds(1);

class StepSync {
 public:
  explicit StepSync(QuorumParams params) : params_(params), quorum_(params) {}

  // The group's call (a heartbeat too). A group's second call before its
  // first is answered replaces it.
  void Call(const SyncCall& call, TimePoint now);
  void Heartbeat(const std::string& group, TimePoint now);
  // The group's agent watches (or stops): while watched it heartbeats at
  // every instant (QuorumMachine::Pin), as a Heartbeat before every call
  // and Tick would.
  void Watched(const std::string& group, bool watched, TimePoint now);
  void Lost(const std::string& group, TimePoint now);
  // The answers due at `now` (a quorum formed), in group order; empty when
  // none.
  std::vector<SyncAnswer> Tick(TimePoint now);

  std::optional<TimePoint> NextDeadline(TimePoint now) const;
  const std::string& reason() const { return quorum_.reason(); }
  const std::optional<Quorum>& last() const { return quorum_.last(); }
  // Groups whose call is not answered yet.
  std::vector<std::string> Pending() const;
  // The median step of the last steady steps (nullopt before any), and the
  // hang time it gives (Duration::max() before the pace is known: none).
  std::optional<Duration> Pace() const;
  Duration HangTime() const;
  // One plain-English line per group benched since the last call (for the
  // server's log), and clears them.
  std::vector<std::string> TakeNotes();

 private:
  struct Held {
    SyncCall call;
    std::optional<bool> decision;  // of its ballot, once decided
    bool asked = false;            // its request is in the quorum machine
  };
  struct Lateness {
    int benches = 0;          // since it last took part in kCleanSteps committed steps
    int64_t clean_steps = 0;  // committed steps it took part in since its last bench
  };
  // Asks the quorum machine for each held call that is not waiting for its
  // ballot's decision: O(log N) per call, O(N) once per decision.
  void AskDecided(TimePoint now);
  void Ask(const std::string& group, Held& held, TimePoint now);
  // Excuses and benches the open vote's members that missed the hang time.
  void CheckHangs(TimePoint now);
  void BenchGroup(const std::string& group, TimePoint now, const std::string& why);
  void NoteResumeBallot(const SyncCall& call, TimePoint now);
  void RecordPace(Duration step);
  // Counts a decided vote's members' clean steps, once.
  void CountCommitted();

  QuorumParams params_;
  QuorumMachine quorum_;
  std::optional<StepVote> vote_;  // the current quorum's step
  std::map<std::string, Held> held_;
  std::set<std::string> unasked_;    // held_, not asked, without a counted ballot
  std::set<std::string> undecided_;  // held_, not asked, its ballot counted: waiting for the decision
  TimePoint vote_opened_{};                // when the current quorum formed
  std::optional<TimePoint> first_ballot_;  // the open vote's first counted ballot
  std::set<std::string> benched_now_;      // benched during the open vote
  bool counted_ = false;                   // CountCommitted ran for the open vote
  std::deque<Duration> paces_;             // the last steady steps' durations
  std::optional<Duration> pace_;           // their median (RecordPace)
  std::map<std::string, Lateness> lateness_;
  std::vector<std::string> notes_;
  std::optional<TimePoint> resume_until_;  // a run in progress met fresh: no quorum before
  std::set<std::string> heard_;            // groups heard while resuming
  int64_t resume_quorum_ = 0;              // the highest quorum id of a ballot while resuming
  std::set<std::string> resume_members_;   // the groups that called with its ballots
  bool resumed_ = false;                   // the groups heard but silent were benched
};

}  // namespace ctrun::rdzv
