// Node identity and the order used to number nodes that have no history.
//
// NodeId is the key of a node (one agent's rendezvous handler) inside one
// run: torchrun's (addr, pid, local_id). Two NodeIds name the same node iff
// all three fields are equal. NodeLess is a total order on NodeIds used
// wherever the machine needs a deterministic order (first-round ranks,
// newcomers, iteration): addr by NaturalLess, then pid, then local_id.
// Plain data, copyable; the functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ctrun::rdzv {

struct NodeId {
  std::string addr;      // --local-addr, else the host name: the main sort key
  int64_t pid = 0;       // the agent's process id (breaks ties on one host)
  int64_t local_id = 0;  // several handlers in one process (usually 0)

  bool operator==(const NodeId&) const = default;
};

// Natural ("version") order on strings: maximal runs of ASCII digits compare
// by numeric value (any length, no overflow), every other byte compares as
// an unsigned byte, and a digit run against a non-digit byte compares as the
// byte '0' would. So "node9" < "node10", "10.0.0.9" < "10.0.0.10",
// "a" < "a0", and case matters ("B" < "a").
// Tie rule: strings that differ only in leading zeros order by the first run
// whose length differs, shorter first ("a1" < "a01" < "a001"). Hence
// NaturalLess is a strict total order: for a != b exactly one of
// NaturalLess(a, b), NaturalLess(b, a) holds.
bool NaturalLess(std::string_view a, std::string_view b);

// addr by NaturalLess, then pid, then local_id (numerically).
bool NodeLess(const NodeId& a, const NodeId& b);

// Comparator for ordered containers keyed by NodeId.
struct NodeIdLess {
  bool operator()(const NodeId& a, const NodeId& b) const { return NodeLess(a, b); }
};

// "addr", then "#pid" when pid != 0, then ".local_id" when local_id != 0,
// e.g. "node3#4242" or "node3#4242.1". For logs and messages only.
std::string ToString(const NodeId& node);

}  // namespace ctrun::rdzv
