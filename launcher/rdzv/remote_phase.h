// RemotePhase: where a remote rendezvous handler (GrpcRendezvous,
// EtcdRendezvous) stands in its life — idle between rounds, joining a
// round, running one, or shut down — and the first step both take on
// Shutdown: enter kShutdown and cancel their timers, so that no timer
// handler starts anything new (each handler checks the phase first).
//
// And the first step of both on NextRound (BeginJoin).
//
// Plain data and two functions. Thread model: the agent's thread
// (the io_context's), like the handlers.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <initializer_list>
#include <optional>

#include "base/result.h"
#include "launcher/rdzv/rendezvous_handler.h"

namespace ctrun::launcher {

enum class RemotePhase { kIdle, kJoining, kRunning, kShutdown };

// Sets `phase` to kShutdown, then cancels `timers` in the order given (their
// pending handlers run with operation_aborted).
void EnterShutdown(RemotePhase& phase,
                   std::initializer_list<std::reference_wrapper<boost::asio::steady_timer>> timers);

// NextRound's first step: the port this node's workers' store gets in the
// round (`store_port`, the agent store's, else a free one), and then the
// phase kJoining with `done` pending. Without a port, `done` gets the error
// (posted on `io`) and the answer is nullopt: the round is not begun.
std::optional<int> BeginJoin(boost::asio::io_context& io, std::optional<int> store_port,
                             std::function<void(Result<Round>)> done, RemotePhase& phase,
                             std::function<void(Result<Round>)>& pending);

}  // namespace ctrun::launcher
