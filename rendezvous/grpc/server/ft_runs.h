// FtRuns: the rendezvous server's fault-tolerance state (docs/fault-
// tolerance.md, "Agent ↔ rendezvous"): one StepSync (step_sync.h) per ft run
// id, which group's FtSync calls are held (by part: FtParts, ft_parts.h),
// which FtWatch streams are open (by group and node), and which groups
// left. The three calls of proto/rendezvous.proto:
//
//  - FtSync(run, params, call, part, parts): a node's per-step call for its
//    part of the group (a group of one node: part 0 of 1, the whole group).
//    Each part's call is held; once every one of the group's `parts` parts
//    is held, FtParts joins them into the group's one SyncCall (its rules:
//    equal committed steps, the and-ed ballot, the addresses in part order
//    joined by ';'), stepped as StepSync::Call then Tick. Differing
//    committed steps end every part's call (InvalidArgument naming the
//    group and the steps) and step nothing. The calls are held until the
//    group's answer is due (a quorum that includes it formed); then every
//    part's held call gets the same SyncAnswer. A part's second FtSync while
//    one is held ends the first (CANCELLED, "replaced"); when every part is
//    then held again, the group's call is joined and stepped again (it
//    replaces the group's call in StepSync). A held call whose client goes
//    away is dropped (DropCall: only that part's), not taken as the group
//    lost; the others still get the answer. A call also ends a leave: the
//    group's watches heartbeat for it again.
//  - FtWatch(run, params, group, node): a stream held for the node's life;
//    node "" is a group's only node. While any watch of the group is open
//    and the group has not left, the group heartbeats at every step of its
//    run (each call and each timer tick), so a step longer than
//    heartbeat_timeout does not make it look dead. ANY of its watches
//    ending on the client's side (WatchGone: cancelled, connection broken)
//    is the group lost at once (StepSync::Lost, then Tick); its other
//    watches then stop heartbeating for it until its next FtSync, as after a
//    leave. A node's second watch replaces its first, which the server ends
//    (CANCELLED, "replaced").
//  - FtLeave(run, group, reason): any node's leave is the group's.
//    StepSync::Lost at once, then Tick; every part's held call, if any, ends
//    ABORTED; its watches no longer heartbeat until its next FtSync. Unknown
//    run: OK, nothing done.
//  When a group that is a member of the run's last quorum is lost (watch end
//  or leave; once per loss), every open watch of every other group (each
//  node's) gets FtLost{group, quorum_id, reason} and one info line is
//  logged. Once a group finished training (a finished leave), every later
//  call is answered at once with finished_step, and so is every part of
//  that group still held.
//
// A run is created by its first FtSync/FtWatch with valid params
// (CheckQuorumParams: InvalidArgument naming the field); a later call with
// other params gets FailedPrecondition naming both. Ft runs are apart from
// the rendezvous runs of the same id.
//
// Bounds (everything here is reachable from the network): run id 1..128
// bytes (kMaxRunIdBytes), group id 1..128 bytes with no control
// character, node id 0..128 bytes with no control character, address <= 1024
// bytes per part and <= 2048 joined (the part that would pass it is
// refused), leave reason <= 256 bytes, parts 1..64 and part 0..parts-1
// (InvalidArgument; a reason's control characters become spaces); a group's
// parts the same in every call while the run knows it (counted, watched or
// held; FailedPrecondition naming both counts); at most Limits::max_groups
// groups per run (131072; a group counts once, whatever its parts, from its first
// FtSync or FtWatch until it is lost and its watches, if any, have ended)
// and Limits::max_runs runs (ResourceExhausted naming the limit); one held
// call per part, at most Limits::max_held_calls held calls in all runs
// together (16384: a held call costs the server a gRPC call), and per group
// at most its parts' count of watches (64 before its first FtSync;
// ResourceExhausted). A run with no open watch and no
// held call for Limits::idle_ttl (5 min: longer than any restart of a
// group's agent) is forgotten: its next call starts it anew, at quorum id 1.
//
// Cost: a call is O(log N) in the run's groups N, but when it forms a
// quorum (O(N log N), StepSync) or loses a member of the last quorum (one
// push per watch).
//
// Pure: no gRPC, no clock reads, no threads. Held calls and watches are
// named by ids the caller gives (unique per server); what is to be done
// with them comes back in an FtOutput. One owner serialises every call (the
// server, under its lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/status.h"
#include "rendezvous/grpc/server/ft_parts.h"
#include "rendezvous/machine/quorum.h"
#include "rendezvous/machine/run_view.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::rdzv {

inline constexpr size_t kMaxFtGroupBytes = 128;
inline constexpr size_t kMaxFtAddressBytes = 1024;
inline constexpr size_t kMaxFtReasonBytes = 256;

struct FtLostEvent {
  std::string group;      // the member lost
  int64_t quorum_id = 0;  // of the quorum it was a member of
  std::string reason;

  bool operator==(const FtLostEvent&) const = default;
};

// What the owner does after a call, with no lock held.
struct FtOutput {
  std::vector<std::pair<uint64_t, SyncAnswer>> answers;  // held call -> its answer (OK)
  std::vector<std::pair<uint64_t, Status>> ended_calls;  // held call -> its error (Aborted: replaced or left)
  std::vector<std::pair<uint64_t, Status>> ended_watches;  // watch -> why the server ends it (replaced: Aborted)
  std::vector<std::pair<uint64_t, FtLostEvent>> pushes;  // watch -> event
  std::vector<std::string> logs;                         // info lines
};

class FtRuns {
 public:
  struct Limits {
    size_t max_runs = 64;
    size_t max_groups = 131072;
    // FtSync calls held at once, all runs together (a group of several
    // nodes holds one per node): each costs the server a gRPC call.
    size_t max_held_calls = 131072;
    Duration idle_ttl = std::chrono::minutes(5);
  };

  explicit FtRuns(Limits limits) : limits_(limits) {}
  FtRuns() : FtRuns(Limits{}) {}

  // Holds `call_id` for `part` of `call.group`, a group of `parts` nodes.
  // Errors as the header says; on error nothing is held or changed.
  Status Sync(const std::string& run_id, const QuorumParams& params, const SyncCall& call, int64_t part,
              int64_t parts, uint64_t call_id, TimePoint now, FtOutput& out);
  // The whole group's call: part 0 of 1.
  Status Sync(const std::string& run_id, const QuorumParams& params, const SyncCall& call, uint64_t call_id,
              TimePoint now, FtOutput& out) {
    return Sync(run_id, params, call, 0, 1, call_id, now, out);
  }
  // Opens `watch_id` for `node` of `group` ("": the group's only node).
  Status Watch(const std::string& run_id, const QuorumParams& params, const std::string& group, uint64_t watch_id,
               TimePoint now, FtOutput& out, const std::string& node = "");
  // `finished_step`: the group finished training there (not a loss: no
  // push); every later Sync of the run is answered at once with it.
  Status Leave(const std::string& run_id, const std::string& group, const std::string& reason, TimePoint now,
               FtOutput& out, std::optional<int64_t> finished_step = std::nullopt);
  // The held call's client went away: forgets it (that part's only) if it
  // is still held.
  void DropCall(const std::string& run_id, const std::string& group, uint64_t call_id);
  // The watch's client ended it: the group lost, if it is still a watch of
  // the group (of any node).
  void WatchGone(const std::string& run_id, const std::string& group, uint64_t watch_id, TimePoint now,
                 FtOutput& out);
  // Ticks every run whose deadline is due at `now` and forgets the idle
  // runs that are due.
  void TickDue(TimePoint now, FtOutput& out);
  // The earliest instant TickDue has something to do; nullopt when none.
  // May be <= now (due).
  std::optional<TimePoint> NextDeadline() const;
  // Ends everything (the server stops): every held call in ended_calls
  // and every watch in ended_watches (Unavailable); forgets every run.
  void EndAll(FtOutput& out);

  size_t run_count() const { return runs_.size(); }
  // The run's last quorum, if it exists and has one (for tests and logs).
  std::optional<Quorum> LastQuorum(const std::string& run_id) const;
  // The run as `ctrun status` shows it; nullopt for a run this server does
  // not hold.
  std::optional<FtRunView> View(const std::string& run_id) const;

 private:
  struct Run {
    explicit Run(QuorumParams p) : params(p), sync(p) {}
    QuorumParams params;
    StepSync sync;
    std::set<std::string> active;  // counted: asked or watched, not lost since
    FtParts held;                  // the held calls, by group and part
    // group -> node -> open watch; no empty inner map.
    std::map<std::string, std::map<std::string, uint64_t>> watches;
    std::set<std::string> left;  // watching, but left or lost since its last FtSync: no heartbeat
    std::set<std::string> known;   // active or watched: what max_groups counts
    std::set<std::string> pinned;  // watched and not left: StepSync::Watched
    std::optional<TimePoint> next_tick;       // StepSync's deadline after the last step
    std::optional<TimePoint> idle_since;      // no watch and no held call since
    int64_t logged_quorum = 0;                // the last quorum id logged
    // Answer batches handed out (Settle): each starts a step of the
    // quorum's members. `told`: the quorum id and batch of the last loss
    // pushed to the watches. One push per step in flight is enough: it
    // aborts that step's cross-replica collective everywhere, and a second
    // loss in the same step has nothing left to abort (at 16k groups and 1 %
    // a minute lost, three losses a step were 48k writes).
    uint64_t batches = 0;
    std::optional<std::pair<int64_t, uint64_t>> told;
    std::optional<int64_t> finished_step;     // a group finished training there: the run is over
  };

  // The run for a call that may create it, or the error.
  Result<Run*> RunFor(const std::string& run_id, const QuorumParams& params, TimePoint now);
  Status Admit(Run& run, const std::string& run_id, const std::string& group) const;
  // Heartbeats the watching groups, ticks, routes the answers, updates the
  // run's deadlines.
  void Settle(const std::string& run_id, Run& run, TimePoint now, FtOutput& out);
  void Lose(const std::string& run_id, Run& run, const std::string& group, const std::string& reason, TimePoint now,
            FtOutput& out, bool finished = false);
  // Steps the group's joined call once every part is held (or ends every
  // part's call when the parts disagree).
  void StepParts(Run& run, const std::string& group, TimePoint now, FtOutput& out);
  // The FtSync calls held by every run together.
  size_t HeldCalls() const;
  // Tells StepSync whether the group heartbeats through its watches
  // (watched and not left), when that changed.
  static void Rewatch(Run& run, const std::string& group, TimePoint now);
  // Forgets the group's part count once the run no longer knows it.
  static void ForgetIfGone(Run& run, const std::string& group);

  Limits limits_;
  std::map<std::string, Run> runs_;
};

}  // namespace ctrun::rdzv
