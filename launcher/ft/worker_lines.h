// The agent's half of the line protocol between a worker and its agent
// under --ft-replicas (docs/fault-tolerance.md, "Worker ↔ agent: a local
// socket"): the lines a worker sends, parsed, and the lines the agent
// sends, formatted. The worker's half is trainer/ft/agent_link.h; the two
// meet only on the wire, and the integration test `ft` runs them together.
//
// Pure: no I/O. Every parse error is InvalidArgument with a one-line
// message naming the field and quoting at most a few bytes of the line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"

namespace ctrun::launcher {

// The longest line either side sends, '\n' included.
inline constexpr size_t kFtMaxLine = 4096;

// A rank's vote on the step it ran.
struct FtWorkerBallot {
  int64_t quorum_id = 0;
  int64_t step = 0;
  bool ok = false;
  bool late = false;  // no, and this rank came late to the step's collective (`2`)

  bool operator==(const FtWorkerBallot&) const = default;
};

// `sync <local_rank> <committed_step> <ring_port> <heal_port> <ballot>`
struct FtSyncLine {
  int local_rank = 0;
  int64_t committed_step = 0;
  uint16_t ring_port = 0;
  uint16_t heal_port = 0;
  std::optional<FtWorkerBallot> ballot;  // `-`: none

  bool operator==(const FtSyncLine&) const = default;
};

// `healed <local_rank> <step> <source> <bytes> <seconds>`
struct FtHealedLine {
  int local_rank = 0;
  int64_t step = 0;
  std::string source;
  uint64_t bytes = 0;
  double seconds = 0;

  bool operator==(const FtHealedLine&) const = default;
};

// `done <local_rank> <step>`: the worker finished training at `step`; its
// link closing is no failure. Answered `bye`.
struct FtDoneLine {
  int local_rank = 0;
  int64_t step = 0;

  bool operator==(const FtDoneLine&) const = default;
};

using FtWorkerLine = std::variant<FtSyncLine, FtHealedLine, FtDoneLine>;

// One line from a worker, without its '\n'.
Result<FtWorkerLine> ParseFtWorkerLine(std::string_view line);

// What the agent answers one rank's `sync`.
struct FtRankAnswer {
  std::optional<bool> commit;        // the decision on its ballot; none counted: nullopt
  int64_t quorum_id = 0;
  int replica_rank = 0;
  int replica_world = 0;
  int64_t max_step = 0;
  std::string right;                 // "host:port" of its ring's right neighbour; "" when world is 1
  std::vector<std::string> heal;     // healing sources, "host:port", the assigned one first
  bool serve = false;

  bool operator==(const FtRankAnswer&) const = default;
};

// `quorum <commit> <quorum_id> <replica_rank> <replica_world> <max_step> <right> <heal> <serve>\n`
std::string FormatFtQuorum(const FtRankAnswer& answer);
// `abort <reason>\n` and `error <message>\n`; control characters in the
// text become spaces, and it is cut to fit kFtMaxLine.
std::string FormatFtAbort(std::string_view reason);
// `finished <step>\n`: the answer to a `sync` once the run is over.
std::string FormatFtFinished(int64_t step);
std::string FormatFtError(std::string_view message);

}  // namespace ctrun::launcher
