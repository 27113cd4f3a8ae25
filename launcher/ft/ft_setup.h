// StartFaultTolerance: what --ft-replicas adds to a launch
// (docs/fault-tolerance.md). The node's own rendezvous is local (its replica
// group is this node: a failure restarts its workers alone), and beside it:
//   - the quorum server at --rdzv-endpoint, hosted here when this node is
//     that endpoint's host (as a c10d rendezvous would be, is_host too);
//   - the group's link to it (rendezvous/grpc's FtClient): its watch, whose
//     pushes abort the workers' cross-replica all-reduce (opened again a
//     second after it ends Unavailable: a broken connection, a server that
//     restarted), and its calls;
//   - the relay (relay.h) the workers talk to.
// A one-node group's id is this agent's node id (`host#pid`, as `ctrun
// status` shows it); a group of --ft-group-size nodes is "group-K" (K its
// index), each node calling for its part of the group's call (its rank in
// the group's rendezvous round) and watching as itself. The quorum ranks
// the groups by id.
//
// ctrun comes as two programs (launcher/rdzv/remote_setup.h): this has two
// definitions, ft_setup.cc (ctrun-full) and ft_absent.cc (ctrun: a refusal
// that a correct hand-off never reaches).
//
// Ownership: the FtRuntime owns all of the above; it borrows `io` and
// `events`, which must outlive it. Destroying it ends the watch, which the
// quorum server takes as the group lost. Thread model: io's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/logs/event_log.h"

namespace ctrun::launcher {

class FtRuntime {
 public:
  virtual ~FtRuntime() = default;
  // What every worker gets: CTRUN_FT_SOCKET, CTRUN_FT_GROUP, CTRUN_FT_HOST
  // and CTRUN_FT_REPLICAS.
  virtual const std::vector<std::pair<std::string, std::string>>& worker_env() const = 0;
  // A round of the group's rendezvous made this node the group's rank
  // `group_rank` (always 0 in a one-node group), before its workers start.
  virtual void OnRound(int group_rank) = 0;
};

// Errors: InvalidArgument as ResolveRendezvous for the endpoint, token and
// TLS; Unavailable when is_host=1 and the server cannot listen, or no route
// leads to the endpoint's host; IOError when the workers' socket cannot be
// bound.
Result<std::unique_ptr<FtRuntime>> StartFaultTolerance(boost::asio::io_context& io, const LaunchConfig& config,
                                                       const Environment& env, EventLog* events);

}  // namespace ctrun::launcher
