// A run's machine state as bytes (proto/rendezvous_state.proto) and back:
// what ctrund --state-dir writes after every change (state_store.h).
//
// The machine's instants are on this process's steady clock, whose origin
// differs in every process; on the wire they are wall-clock nanoseconds. The
// caller passes both clocks' "now" (ClockPair), so these functions read no
// clock and are pure.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "rendezvous/machine/machine.h"

namespace ctrun::rdzv {

// The same instant on the steady clock and on the wall clock.
struct ClockPair {
  TimePoint steady;
  std::chrono::system_clock::time_point wall;
};

struct StoredRun {
  std::string run_id;
  MachineState state;
};

// Serialises `run` (instants mapped through `now`).
std::string EncodeRunState(const StoredRun& run, ClockPair now);

// Parses bytes from EncodeRunState (instants mapped through this process's
// `now`). InvalidArgument "... not a ctrun run state ..." when the bytes do
// not parse, the format is not 1, the run id is empty or a node status is
// unknown. The state's invariants are not checked here: Import does that.
Result<StoredRun> DecodeRunState(std::string_view bytes, ClockPair now);

// What a restarted daemon does to a state it read back: no node could reach
// it while it was down, so each node's (and each finishing node's) last
// keep-alive is taken as `now`, giving every node a whole keep-alive timeout
// to come back. Join deadlines and the last call are kept as they were
// (absolute): the agents' own join timers ran through the outage too.
void ForgiveOutage(MachineState& state, TimePoint now);

}  // namespace ctrun::rdzv
