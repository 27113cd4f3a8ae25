// QuorumMachine: the per-step quorum of a fault-tolerant run (ctrun
// --ft-replicas MIN:MAX; docs/fault-tolerance.md). Each replica group (a
// node, or --ft-group-size nodes) asks, before each step, for the quorum it
// is to train that step in; the machine decides when a quorum forms and who
// is in it. A group that dies shrinks the quorum of the next step instead of
// ending the round of the others; a group that comes back joins it. The
// semantics are torchft's Lighthouse (meta-pytorch/torchft), with the
// differences below.
//
// Inputs (each with the caller's time; the machine reads no clock):
//  - Request(member): the group asks for its next step's quorum, giving its
//    committed step and the address of its healing server. It is then a
//    participant until a quorum that includes it forms. A request is also a
//    heartbeat.
//  - Heartbeat(id): the group is alive (sent by its agent between steps,
//    e.g. with its rendezvous keep-alive).
//  - Lost(id): the rendezvous knows the group's agent is gone (its stream
//    broke, it left, it was evicted): it is not healthy from that instant,
//    without waiting for a heartbeat timeout. This is what the push-based
//    rendezvous adds over torchft's heartbeats alone.
//  - Bench(id, until): the group held the others up (it missed its step's
//    vote by the hang time, or came late to the step's collective:
//    step_sync.h). Until `until` it is neither counted nor
//    chosen; if it is not asking, it is also not counted again before its
//    next Request (its heartbeats do not bring it back: a stopped process's
//    agent still heartbeats). No quorum forms while a benched group is at a
//    later step than every group that would be in it: the groups behind
//    would train from their own older state (a relaunched group from
//    nothing) while the run's state waits in the benched one; they wait for
//    it instead. (When the groups at the later step are Lost, the others go
//    on from their own step, as before.)
//  - Tick(): decides. Returns the new quorum when one forms (every
//    participant gets it, and the participants are cleared), else nullopt;
//    reason() says why, in plain English, either way.
//
// When a quorum forms (healthy: a heartbeat or request within
// heartbeat_timeout, not Lost since, and not benched):
//  - Fast path: every member of the previous quorum is a healthy
//    participant again. It forms at once, with every healthy participant
//    (newcomers included). In steady state, one request per group per step
//    and no waiting.
//  - Otherwise it needs at least min_replicas healthy participants, and more
//    than half of the healthy groups (the split-brain guard: of two sides
//    that cannot hear each other, at most one is a majority of what the
//    machine hears). Then it forms at once when every healthy group takes
//    part, else when join_timeout has passed since the first of the current
//    participants asked (stragglers that are alive but late get that long).
//  - At most max_replicas members: the previous quorum's members first,
//    then the others in the order they first asked, then by id.
//  - Members are sorted by id; a member's rank in the quorum is its index.
// The quorum id goes up by one when the members change, or when a member
// reports commit failures (its process group must be rebuilt); otherwise it
// stays, and the groups keep their communicators.
//
// A partitioned minority never gets a quorum from this machine's side of a
// partition unless it is a majority of what the machine still hears: set
// MIN to a majority of the groups (MIN > MAX/2) to rule out a minority
// training alone under any partition. (torchft's guard is the same.)
//
// Cost: every input and every Tick that forms nothing is O(log N) in the
// groups N (the counts of healthy, asking and returning groups are kept as
// the inputs come; a heartbeat growing stale or a bench running out is
// taken from an ordered index at the Tick that passes it). Forming a quorum
// is O(N log N), once per quorum. (A Tick at an earlier instant than the
// one before recounts everything: O(N).)
//
// Pure: no I/O, no clock reads, no threads. Copyable; one owner serialises
// every call.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace ctrun::rdzv {

struct QuorumParams {
  int min_replicas = 1;
  int max_replicas = 1 << 20;
  Duration join_timeout = std::chrono::seconds(60);       // torchft's default
  Duration heartbeat_timeout = std::chrono::seconds(5);   // torchft's default

  bool operator==(const QuorumParams&) const = default;
};

// InvalidArgument naming the field when min_replicas < 1, max_replicas <
// min_replicas, or a timeout is not positive.
Status CheckQuorumParams(const QuorumParams& params);

// One replica group as it asks for a quorum.
struct QuorumMember {
  std::string id;               // the replica group, e.g. "group-1"
  int64_t step = 0;             // its last committed step
  std::string address;          // host:port of its healing server
  int64_t commit_failures = 0;  // steps it could not commit since its last request

  bool operator==(const QuorumMember&) const = default;
};

struct Quorum {
  int64_t id = 0;                     // > 0
  std::vector<QuorumMember> members;  // sorted by id

  int64_t max_step() const;                             // the largest member step
  std::optional<size_t> rank_of(const std::string& member_id) const;
  bool operator==(const Quorum&) const = default;
};

class QuorumMachine {
 public:
  explicit QuorumMachine(QuorumParams params) : params_(params) {}

  void Request(const QuorumMember& member, TimePoint now);
  void Heartbeat(const std::string& id, TimePoint now);
  // While pinned, the group counts as heartbeating at every instant (its
  // agent's watch stream is open: the rendezvous server's FtRuns), as if
  // Heartbeat(id, t) came before every Tick(t). Unpinning heartbeats it at
  // `now` once. Lost unpins it.
  void Pin(const std::string& id, bool pinned, TimePoint now);
  void Lost(const std::string& id, TimePoint now);
  void Bench(const std::string& id, TimePoint until);
  std::optional<Quorum> Tick(TimePoint now);

  // Why the last Tick did or did not form a quorum.
  const std::string& reason() const { return reason_; }
  // The previous quorum, if any has formed.
  const std::optional<Quorum>& last() const { return last_; }
  // The first instant after `now` at which a Tick may decide otherwise
  // without any new input (a straggler's join timeout running out, a
  // heartbeat growing stale), or nullopt when nobody is waiting.
  std::optional<TimePoint> NextDeadline(TimePoint now) const;
  // Participants waiting for a quorum now, by id.
  std::vector<std::string> Waiting() const;

 private:
  struct Participant {
    QuorumMember member;
    TimePoint asked;   // when this request came
    uint64_t order;    // arrival order of the group's first request
  };
  // What the counts hold for one group (as of now_).
  struct Counted {
    bool healthy = false;
    bool ready = false;     // healthy and waiting
    bool returned = false;  // ready and a member of last_
    TimePoint ready_at{};   // ready: when its request came (its key in ready_)
  };
  using Timed = std::pair<TimePoint, std::string>;

  bool Healthy(const std::string& id, TimePoint now) const;
  // Recounts one group as of now_ (its Counted, the counts, ready_).
  void Refresh(const std::string& id);
  // Brings every count to `now`: the heartbeats grown stale and the benches
  // run out since the last Tick (or everything, when time went back).
  void Advance(TimePoint now);
  void SetAlive(const std::string& id, TimePoint now);
  void Unwait(const std::string& id);
  // A benched group (not Lost) at a later step than every one of `members`.
  std::optional<std::string> AheadAndBenched(const std::vector<QuorumMember>& members, TimePoint now) const;
  std::vector<QuorumMember> Choose(const std::vector<const Participant*>& ready) const;
  std::optional<Quorum> FormUnlessAhead(TimePoint now, std::string why, const std::string& counts);
  Quorum Form(std::vector<QuorumMember> members);

  QuorumParams params_;
  std::map<std::string, TimePoint> alive_;  // last heartbeat or request, per group
  std::set<Timed> alive_by_time_;           // alive_ ordered by time
  std::set<std::string> pinned_;
  std::map<std::string, uint64_t> first_seen_;
  std::map<std::string, Participant> waiting_;
  std::set<Timed> waiting_by_asked_;          // waiting_ by the time each asked
  std::map<std::string, TimePoint> benched_;  // not counted before this instant
  std::set<std::string> silent_;              // benched while not asking: not counted until it asks
  std::map<std::string, int64_t> step_of_;    // each group's last asked step
  std::optional<Quorum> last_;
  std::set<std::string> in_last_;             // last_'s member ids
  // The counts (as of now_): healthy groups, ready ones (also by the time
  // they asked), and the members of last_ among the ready ones.
  std::map<std::string, Counted> counted_;
  std::set<Timed> ready_;
  size_t healthy_ = 0, returned_ = 0;
  TimePoint now_{};  // the latest instant given
  int64_t next_id_ = 1;
  std::string reason_ = "no quorum asked for yet";
};

}  // namespace ctrun::rdzv
