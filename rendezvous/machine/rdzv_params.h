// The settings of one rendezvous run, as the machine needs them.
//
// Filled by the launcher (from --nnodes and --rdzv-conf) or by the daemon
// (from the first Join of a run); checked by ValidateParams before any
// machine is built. Plain data, copyable.
#pragma once

#include <chrono>
#include <string>

#include "base/clock.h"
#include "base/status.h"

namespace ctrun::rdzv {

struct Params {
  int min_nodes = 1;                                       // --nnodes MIN
  int max_nodes = 1;                                       // --nnodes MAX
  Duration join_timeout = std::chrono::seconds(600);       // a join's time to get into a round
  Duration last_call_timeout = std::chrono::seconds(30);   // wait for more nodes once MIN joined
  Duration close_timeout = std::chrono::seconds(30);       // the client's deadline for Close; unused by the machine
  Duration keep_alive_interval = std::chrono::seconds(5);  // how often each node sends KeepAlive
  int keep_alive_max_attempt = 3;                          // missed keep-alives before eviction
  // --max-unhealthy-nodes: the run closes once more nodes than this left it
  // as unhealthy; -1 = max_nodes - min_nodes (MaxUnhealthy).
  int max_unhealthy_nodes = -1;

  bool operator==(const Params&) const = default;
};

// OK when 0 < min_nodes <= max_nodes, every duration is positive and
// keep_alive_max_attempt >= 1. Otherwise InvalidArgument naming the first bad
// value in the order of the struct, e.g.
// "--nnodes '3:2': MIN must not exceed MAX (use MIN:MAX with 0 < MIN <= MAX)".
Status ValidateParams(const Params& params);

// The unhealthy-node budget in effect: max_unhealthy_nodes, or
// max_nodes - min_nodes when it is -1.
int MaxUnhealthy(const Params& params);

// keep_alive_interval * keep_alive_max_attempt: a node silent this long is dead.
Duration KeepAliveTimeout(const Params& params);

// Seconds as a short decimal string for messages: "30 s", "0.5 s".
std::string FormatSeconds(Duration d);

}  // namespace ctrun::rdzv
