// The lines an agent sends its workers under --ft-replicas
// (docs/fault-tolerance.md, "Worker <-> agent: a local socket"): the
// answers `quorum` (to a `sync`), `finished` (to a `sync` once the run is
// over) and `bye` (to a `done`), and the pushes `abort <reason>` (a member
// of the quorum was lost) and `error <message>` (the agent refused the
// worker's line). Their text (the agent writes it, launcher/ft/relay.h) and
// their parse (the worker reads it, trainer/ft/agent_link.h). The worker's
// lines are worker_lines.h.
//
// ASCII, space-separated fields, one line each, at most kMaxLineBytes bytes
// with the trailing '\n'. Pure: no I/O. Every parse error is
// InvalidArgument naming the field that is missing or malformed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ctrun::ft_wire {

// `quorum <commit> <quorum_id> <replica_rank> <replica_world> <max_step> <right> <heal> <serve>`:
// one rank's answer to its `sync`.
struct QuorumLine {
  std::optional<bool> commit;  // the decision on its ballot; `-`: no ballot counted
  int64_t quorum_id = 0;
  int replica_rank = 0;
  int replica_world = 0;
  int64_t max_step = 0;
  // The ring's right neighbour, `<right>` = host:port (host_port.h; a host
  // read loses its IPv6 brackets, one written is written as given); `-`
  // when the world is 1: host "" and port 0.
  std::string right_host;
  uint16_t right_port = 0;
  std::vector<std::string> heal_sources;  // "host:port", the assigned one first; `-`: empty, no healing
  bool serve = false;

  bool operator==(const QuorumLine&) const = default;
};

// `quorum ...\n`.
std::string FormatQuorum(const QuorumLine& line);
// One `quorum` line, without or with its trailing '\n'. InvalidArgument
// naming the field that is missing or malformed (or the extra text).
Result<QuorumLine> ParseQuorum(std::string_view line);

// `finished <step>\n`: the answer to a `sync` once the run finished at
// `step`; nothing is left to train.
std::string FormatFinished(int64_t step);
// The step of a `finished <step>` line (without its '\n'); nullopt when
// it is no number >= 0.
std::optional<int64_t> ParseFinished(std::string_view line);

// `bye\n`: the answer to a `done`.
std::string FormatBye();

// `abort <reason>\n` and `error <message>\n`; control characters in the
// text become spaces, and it is cut to fit kMaxLineBytes.
std::string FormatAbort(std::string_view reason);
std::string FormatError(std::string_view message);

// Whether `line` (without its '\n') is of the kind `verb` ("quorum",
// "finished", "bye", "abort", "error"): it is the verb alone, or the verb
// and a space.
bool VerbIs(std::string_view line, std::string_view verb);
// The text of the line after its verb and one space ("" when none): the
// reason of an `abort`, the message of an `error`.
std::string TextAfterVerb(std::string_view line, std::string_view verb);

}  // namespace ctrun::ft_wire
