// RemotePhase: where a remote rendezvous handler (GrpcRendezvous,
// EtcdRendezvous) stands in its life — idle between rounds, joining a
// round, running one, or shut down — and the first step both take on
// Shutdown: enter kShutdown and cancel their timers, so that no timer
// handler starts anything new (each handler checks the phase first).
//
// Plain data and one function; no I/O. Thread model: the agent's thread
// (the io_context's), like the handlers.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <initializer_list>

namespace ctrun::launcher {

enum class RemotePhase { kIdle, kJoining, kRunning, kShutdown };

// Sets `phase` to kShutdown, then cancels `timers` in the order given (their
// pending handlers run with operation_aborted).
void EnterShutdown(RemotePhase& phase,
                   std::initializer_list<std::reference_wrapper<boost::asio::steady_timer>> timers);

}  // namespace ctrun::launcher
