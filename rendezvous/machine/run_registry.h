// RunRegistry: the rendezvous machines of one server, keyed by run id.
//
// Two modes:
//  * kFixed (a rendezvous server inside an agent, or a daemon started for
//    given jobs): runs exist only once Add()ed; a request for any other run
//    id is NotFound.
//  * kAutoCreate (the standalone daemon): the first Join of an unknown run id
//    creates its machine with the Params that Join carried; later Joins must
//    ask for the same --nnodes.
//
// Forgetting closed runs (ctrund --closed-run-ttl): with a TTL, a run that is
// closed and holds no live node any more (every member of its last round left
// or fell silent) is forgotten TTL after the step that drained it: the owner
// reports every step with NoteStepped(run_id, now) and calls ForgetDue(now)
// at the start of each request and when NextForget() is reached. A forgotten
// id is unknown again: Find says NotFound, and in kAutoCreate mode a Join
// with it starts a new run. Time is the caller's steady clock; nothing here
// reads a clock.
//
// Plain data, no I/O; not thread-safe (the server's single owner calls it).
// Pointers returned stay valid until Remove() of that run id or the
// registry's destruction.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "rendezvous/machine/machine.h"
#include "rendezvous/machine/rdzv_params.h"

namespace ctrun::rdzv {

// The longest run id a server takes, in bytes: what ctrun's --rdzv-id
// allows (launcher/cli/identifier.h). A longer one in a request is refused
// (InvalidArgument) before anything is made for it.
inline constexpr size_t kMaxRunIdBytes = 128;

class RunRegistry {
 public:
  enum class Mode { kFixed, kAutoCreate };

  // `closed_run_ttl`: how long a closed, drained run is kept (zero: until
  // the next ForgetDue); nullopt keeps every run until Remove (an agent's
  // own server, whose one run must keep answering kClosed).
  explicit RunRegistry(Mode mode, std::optional<Duration> closed_run_ttl = std::nullopt)
      : mode_(mode), ttl_(closed_run_ttl) {}

  // Adds `run_id` with `params`. OK if it is new, or already there with
  // equal --nnodes (the existing machine is kept). InvalidArgument from
  // ValidateParams or for an empty run id; FailedPrecondition when the run
  // exists with another --nnodes.
  Status Add(const std::string& run_id, const Params& params);

  // The machine of `run_id`, or NotFound naming the run ids served here
  // (with a launch's fix; a query's, `ctrun status`'s, reads "run 'x' is
  // not served here (serving 'a')").
  enum class Asker { kNode, kQuery };
  Result<RendezvousMachine*> Find(const std::string& run_id, Asker asker = Asker::kNode);

  // For a Join: Find, and in kAutoCreate mode create an unknown run with
  // `params`. Errors: NotFound (kFixed, unknown id), InvalidArgument (bad
  // params for a new run, or an empty id), FailedPrecondition (the run exists
  // with another --nnodes than `params`).
  Result<RendezvousMachine*> FindForJoin(const std::string& run_id, const Params& params);

  // Forgets `run_id`; true if it was there. A later Join in kAutoCreate mode
  // starts a fresh run, so remove only runs nobody will join again.
  bool Remove(const std::string& run_id);

  // `run_id` was stepped at `now` (or resumed from a state file). When it is
  // closed and holds no live node, and has no forget time yet, it gets one:
  // now + TTL. Nothing without a TTL or for an unknown run.
  void NoteStepped(const std::string& run_id, TimePoint now);

  // Forgets every run whose forget time is <= now; returns their ids, sorted.
  std::vector<std::string> ForgetDue(TimePoint now);

  // The earliest forget time, or nullopt when no run is due to be forgotten.
  std::optional<TimePoint> NextForget() const;

  // How many runs it serves, in O(1).
  size_t size() const { return runs_.size(); }

  // Served run ids, sorted.
  std::vector<std::string> RunIds() const;

  // For a query that names no run (`ctrun status`, `ctrun logs` without
  // --rdzv-id): the id of the one run served; NotFound otherwise, naming
  // the runs (the first 8) and the fix.
  Result<std::string> OnlyRunId() const;

  Mode mode() const { return mode_; }

 private:
  std::string Served() const;  // "'a', 'b'" (the first 8, then "and N more"); "" for none
  Status CheckSameNodes(const std::string& run_id, const RendezvousMachine& machine, const Params& params) const;

  Mode mode_;
  std::optional<Duration> ttl_;
  std::map<std::string, RendezvousMachine> runs_;
  std::map<std::string, TimePoint> forget_at_;              // run -> when it goes
  std::set<std::pair<TimePoint, std::string>> forget_order_;  // the same, by time
};

}  // namespace ctrun::rdzv
