// `ctrun logs`: every node's worker output in one stream, as the run's
// rendezvous server (the hosting agent, or ctrund) keeps it from agents run
// with --share-logs: one line per worker line, "<node>/<rank>: <text>", in
// the order the server received them (so in order per rank).
//
//   ctrun logs [--rdzv-endpoint HOST:PORT] [--rdzv-id ID] [--rdzv-conf K=V,...]
//              [--follow] [--rank R] [--node N] [--since SECONDS]
//
// The endpoint, id and conf flags are `ctrun status`'s (the launcher's rows
// of the flag table). --since takes seconds before now (e.g. 30 or 1.5).
// Exit codes: 0 shown (with --follow: the server ended the stream, because
// it forgot the run or shut down); 2 a bad flag; 1 the server is
// unreachable, refused the request (token, TLS), or does not serve the run.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "launcher/app/status_command.h"
#include "launcher/cli/config.h"

namespace ctrun::launcher {

struct LogsArgs {
  bool help = false;
  StatusArgs target;             // endpoint, run id, token/TLS settings
  bool follow = false;
  std::optional<int> rank;
  std::string node;
  std::optional<double> since_s;  // seconds before now
};

// From the arguments after "logs" and the environment; InvalidArgument, one
// line naming the argument, for a bad one.
Result<LogsArgs> ParseLogsArgs(const std::vector<std::string>& args, const Environment& env);

// The usage text of `ctrun logs --help`.
std::string LogsHelpText();

// One output line: "<node>/<rank>: <text>\n".
std::string FormatLogLine(const std::string& node, int rank, const std::string& text);
// Appends FormatLogLine's line to `out`, with no allocation beyond out's growth.
void AppendLogLine(std::string& out, const std::string& node, int rank, const std::string& text);
// Appends FormatLogLine's line for each line of `text` (whole lines, each
// ending in '\n'; a last line without one gets one), with no allocation
// beyond out's growth: the "<node>/<rank>: " prefix is made once.
void AppendLogChunk(std::string& out, const std::string& node, int rank, std::string_view text);

// Runs `ctrun logs ARGS`: prints the lines or a one-line error; returns the
// exit code.
int RunLogsCommand(const std::vector<std::string>& args, const Environment& env);

}  // namespace ctrun::launcher
