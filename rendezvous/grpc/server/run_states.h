// RunStates: ctrund --state-dir (state_store.h): each run's state written
// after every step that changed it, and its file removed when the run is
// forgotten. Without a state dir (Keep never called), nothing is written.
//
// The writes, fsyncs included, are made under the server's mutex on
// purpose (server.h says why): every reply and push of a step, and every
// answer another call reads from that machine afterwards, goes out only
// after the state it reflects is on disk; and the writes of one run land in
// step order, so an older state never overwrites a newer one.
//
// Locking: none of its own; the server's mutex guards it. A failed write
// or removal is logged, and serving goes on.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "rendezvous/machine/machine.h"
#include "rendezvous/persist/state_store.h"

namespace ctrun::rdzv {

class RunStates {
 public:
  // Writes to `store` from now on (the runs it held were resumed).
  void Keep(StateStore store) { store_ = std::move(store); }
  // Writes the run's state when there is a state dir and `changed` (a step
  // that only refreshed keep-alive times is not written: a restart
  // refreshes them all anyway, see ForgiveOutage).
  void Save(const std::string& run_id, const RendezvousMachine& machine, bool changed);
  // The run is forgotten: so is its file.
  void Remove(const std::string& run_id);

 private:
  std::optional<StateStore> store_;
};

}  // namespace ctrun::rdzv
