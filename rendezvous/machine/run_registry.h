// RunRegistry: the rendezvous machines of one server, keyed by run id.
//
// Two modes:
//  * kFixed (a rendezvous server inside an agent, or a daemon started for
//    given jobs): runs exist only once Add()ed; a request for any other run
//    id is NotFound.
//  * kAutoCreate (the standalone daemon): the first Join of an unknown run id
//    creates its machine with the Params that Join carried; later Joins must
//    ask for the same --nnodes.
// Plain data, no I/O; not thread-safe (the server's single owner calls it).
// Pointers returned stay valid until Remove() of that run id or the
// registry's destruction.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "rendezvous/machine/machine.h"
#include "rendezvous/machine/rdzv_params.h"

namespace ctrun::rdzv {

class RunRegistry {
 public:
  enum class Mode { kFixed, kAutoCreate };

  explicit RunRegistry(Mode mode) : mode_(mode) {}

  // Adds `run_id` with `params`. OK if it is new, or already there with
  // equal --nnodes (the existing machine is kept). InvalidArgument from
  // ValidateParams or for an empty run id; FailedPrecondition when the run
  // exists with another --nnodes.
  Status Add(const std::string& run_id, const Params& params);

  // The machine of `run_id`, or NotFound naming the run ids served here.
  Result<RendezvousMachine*> Find(const std::string& run_id);

  // For a Join: Find, and in kAutoCreate mode create an unknown run with
  // `params`. Errors: NotFound (kFixed, unknown id), InvalidArgument (bad
  // params for a new run, or an empty id), FailedPrecondition (the run exists
  // with another --nnodes than `params`).
  Result<RendezvousMachine*> FindForJoin(const std::string& run_id, const Params& params);

  // Forgets `run_id`; true if it was there. A later Join in kAutoCreate mode
  // starts a fresh run, so remove only runs nobody will join again.
  bool Remove(const std::string& run_id);

  // Served run ids, sorted.
  std::vector<std::string> RunIds() const;

  Mode mode() const { return mode_; }

 private:
  Status CheckSameNodes(const std::string& run_id, const RendezvousMachine& machine, const Params& params) const;

  Mode mode_;
  std::map<std::string, RendezvousMachine> runs_;
};

}  // namespace ctrun::rdzv
