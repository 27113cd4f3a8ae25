// FtQuorumLink: what the agent's relay (relay.h) needs of the quorum server
// under --ft-replicas: the group's per-step call and its leave. ctrun-full
// implements it over rendezvous/grpc's FtClient (ft_setup.cc); tests give a
// fake. Results are delivered on the relay's io_context thread.
#pragma once

#include <functional>
#include <string>

#include "base/result.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::launcher {

class FtQuorumLink {
 public:
  virtual ~FtQuorumLink() = default;
  // This node's part (its rank in its group of --ft-group-size nodes) of
  // the group's call; `done` gets the answer or the error (Cancelled when a
  // newer call replaced it).
  virtual void Sync(const rdzv::SyncCall& call, int part,
                    std::function<void(const Result<rdzv::SyncAnswer>&)> done) = 0;
  // The group stops taking part for now (its workers failed); `reason` is
  // plain English.
  virtual void Leave(const std::string& reason) = 0;
  // The group's workers all finished training at `step`: the run is over
  // (a group that asks later is told so). `done` runs once the server
  // answered (or the call failed: the run ends all the same).
  virtual void Finished(int64_t step, std::function<void()> done) = 0;
};

}  // namespace ctrun::launcher
