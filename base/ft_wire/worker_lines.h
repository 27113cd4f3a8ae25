// The lines a worker sends its agent under --ft-replicas
// (docs/fault-tolerance.md, "Worker <-> agent: a local socket"): `sync`,
// `healed` and `done`, as structs, with their text (the worker writes it,
// trainer/ft/agent_link.h) and their parse (the agent reads it,
// launcher/ft/relay.h). The agent's answers are agent_lines.h.
//
// ASCII, space-separated fields, one line each, at most kMaxLineBytes bytes
// with the trailing '\n'. Pure: no I/O. Every parse error is
// InvalidArgument with a one-line message naming the field and quoting at
// most a few bytes of the line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "base/result.h"

namespace ctrun::ft_wire {

// A rank's vote on the step it just ran: `<quorum_id>/<step>/<ok>`, ok `1`
// (yes), `0` (no) or `2` (no, and late: this rank reached the step's
// cross-replica all-reduce past the time its peers wait there).
struct Ballot {
  int64_t quorum_id = 0;
  int64_t step = 0;
  bool ok = false;
  bool late = false;  // with ok false: `2`

  bool operator==(const Ballot&) const = default;
};

// `sync <local_rank> <committed_step> <ring_port> <heal_port> <ballot>`,
// the ballot `-` when absent (the first call, or after healing).
struct SyncLine {
  int local_rank = 0;
  int64_t committed_step = 0;
  uint16_t ring_port = 0;
  uint16_t heal_port = 0;
  std::optional<Ballot> ballot;

  bool operator==(const SyncLine&) const = default;
};

// `healed <local_rank> <step> <source> <bytes> <seconds>` (written with
// seconds to the millisecond).
struct HealedLine {
  int local_rank = 0;
  int64_t step = 0;
  std::string source;
  uint64_t bytes = 0;
  double seconds = 0;

  bool operator==(const HealedLine&) const = default;
};

// `done <local_rank> <step>`: the worker finished training at `step`; its
// link closing is no failure. Answered `bye`.
struct DoneLine {
  int local_rank = 0;
  int64_t step = 0;

  bool operator==(const DoneLine&) const = default;
};

using WorkerLine = std::variant<SyncLine, HealedLine, DoneLine>;

// Each with its trailing '\n'.
std::string FormatSync(const SyncLine& line);
std::string FormatHealed(const HealedLine& line);
std::string FormatDone(const DoneLine& line);

// One line from a worker, without its '\n'.
Result<WorkerLine> ParseWorkerLine(std::string_view line);

}  // namespace ctrun::ft_wire
