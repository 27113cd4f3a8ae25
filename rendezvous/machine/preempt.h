// Preemption notices in the rendezvous machine: the bounds a Preempt event
// must meet (the server refuses one that does not, before the machine sees
// it) and what a run remembers of the notices it got.
//
// A node whose agent received a preemption notice (a signal with a deadline)
// tells the run; the machine decides the push of the run's first notice to
// every other node it holds (PreemptNotice, events.h) and only counts later
// ones, so a node hears of a run's preemption at most once.
//
// Pure data and functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "rendezvous/machine/node_order.h"

namespace ctrun::rdzv {

// The longest source a notice may name (bytes of printable ASCII), and the
// largest budget it may give: what the server keeps of a caller's notice is
// bounded.
inline constexpr size_t kMaxPreemptSource = 64;
inline constexpr double kMaxPreemptRemainingS = 7 * 24 * 3600.0;

// OK when `source` is at most kMaxPreemptSource bytes of printable ASCII
// and `remaining_s` is a finite number in (0, kMaxPreemptRemainingS];
// otherwise InvalidArgument with one line naming the field and the fix.
Status CheckPreempt(double remaining_s, std::string_view source);

// The run's first notice, and how many it got in all.
struct PreemptRecord {
  NodeId node;              // the sender
  double remaining_s = 0;   // the budget it named
  std::string source;
  TimePoint at;             // when the machine stepped it (the caller's steady clock)
  int notices = 1;          // Preempts the run got, this one included
  bool operator==(const PreemptRecord&) const = default;
};

}  // namespace ctrun::rdzv
