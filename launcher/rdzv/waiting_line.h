// The line a joining agent prints every few seconds while its rendezvous
// round forms (GrpcRendezvous): how many nodes it still waits for, where,
// for which run, and when it gives up. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rendezvous/machine/machine.h"

namespace ctrun::launcher {

// `counts`: the round as the server last reported it; `give_up_in_s`: the
// seconds left of join_timeout; `last_call_in_s`: the seconds until the
// round starts with the nodes it has, when at least MIN have joined.
//   fewer than MIN: "waiting for 1 more node (1/2) at HOST:PORT, run 'job5';
//                    giving up in 590 s"
//   MIN or more, with a last call: "waiting for up to 2 more nodes (2/4) at
//                    HOST:PORT, run 'job5'; starting with 2 in 25 s"
//   otherwise:      "waiting for the round to start with 2 nodes at
//                    HOST:PORT, run 'job5'; giving up in 590 s"
std::string WaitingLine(const rdzv::Counts& counts, std::string_view endpoint, std::string_view run_id,
                        double give_up_in_s, std::optional<double> last_call_in_s);

}  // namespace ctrun::launcher
