// The lines a worker and its agent exchange over the agent's Unix socket
// (docs/fault-tolerance.md, "Worker <-> agent: a local socket"): the
// worker's `sync` and `healed` lines and the agent's `quorum` answer, as
// structs, with their text form. ASCII, space-separated fields, one line
// each, at most kFtMaxLineBytes bytes including the trailing '\n'.
//
// A `host:port` (the ring's right neighbour, a healing source) splits at its
// last ':'; an IPv6 host may be written in brackets ("[::1]:4000"), which
// are removed. Ports are 1..65535 there; `-` stands for none.
//
// Free functions, no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer::ft {

inline constexpr std::size_t kFtMaxLineBytes = 4096;

// A worker's vote on the step it just ran: `<quorum_id>/<step>/<ok>`, ok
// `1` (yes), `0` (no) or `2` (no, and late: this rank reached the step's
// cross-replica all-reduce past the time its peers wait there).
struct LineBallot {
  int64_t quorum_id = 0;
  int64_t step = 0;
  bool ok = false;
  bool late = false;  // with ok false: `2`
};

// `sync <local_rank> <committed_step> <ring_port> <heal_port> <ballot>`,
// the ballot `-` when absent (the first call, or after healing).
struct SyncLine {
  int local_rank = 0;
  int64_t committed_step = 0;
  uint16_t ring_port = 0;
  uint16_t heal_port = 0;
  std::optional<LineBallot> ballot;
};

// `quorum <commit> <quorum_id> <replica_rank> <replica_world> <max_step> <right> <heal> <serve>`.
struct QuorumLine {
  std::optional<bool> commit;  // `-`: no ballot counted
  int64_t quorum_id = 0;
  int replica_rank = 0;
  int replica_world = 0;
  int64_t max_step = 0;
  std::string right_host;
  uint16_t right_port = 0;                // port 0: none (world 1)
  std::vector<std::string> heal_sources;  // "host:port", assigned first; empty: no healing
  bool serve = false;
  // `finished <step>` instead of `quorum ...`: the run finished at that
  // step before this group asked; nothing is left to train.
  std::optional<int64_t> finished_step = std::nullopt;
};

// `healed <local_rank> <step> <source> <bytes> <seconds>` (seconds with
// millisecond precision).
struct HealedLine {
  int local_rank = 0;
  int64_t step = 0;
  std::string source;
  uint64_t bytes = 0;
  double seconds = 0;
};

std::string FormatSync(const SyncLine& line);  // with the trailing '\n'
std::string FormatHealed(const HealedLine& line);  // with the trailing '\n'

// One `quorum` line, without or with its trailing '\n'. InvalidArgument
// naming the field that is missing or malformed (or the extra text).
Result<QuorumLine> ParseQuorum(std::string_view line);

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// "host:port" (see above). InvalidArgument naming `what` when malformed.
Result<HostPort> ParseHostPort(std::string_view text, std::string_view what);

}  // namespace ctrun::trainer::ft
