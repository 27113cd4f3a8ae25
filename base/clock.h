// Time as the pure parts of ctrun see it: a steady instant passed in by the
// caller. Pure code (the rendezvous machine, the agent's decisions) never
// reads a clock itself; the I/O shells pass Now() in, tests pass a fake.
#pragma once

#include <chrono>

namespace ctrun {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = Clock::duration;

}  // namespace ctrun
