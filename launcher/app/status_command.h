// `ctrun status`: a one-screen table of a run as its rendezvous server (the
// hosting agent, or ctrund) sees it: the round, its state, and every node
// with its group rank, workers, address and last keep-alive.
//
//   ctrun status --rdzv-endpoint HOST:PORT --rdzv-id ID [--rdzv-conf token_file=...,tls_ca=...] [--why]
//
// The three flags are the launcher's rows of the flag table (both spellings,
// "--flag VALUE" or "--flag=VALUE", the PET_* fallbacks, the same checks).
// --why prints, instead of the table, the verdict on the failures the
// nodes reported (status_why.h): the root cause and its consequences.
// Exit codes (the same with --why): 0 shown; 2 a bad flag; 1 the server is unreachable, refused the
// request, or does not serve the run.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "rendezvous/machine/run_view.h"

namespace ctrun::launcher {

// The status subcommand's settings, from its arguments (without "status")
// and the environment. kHelp-like: `help` is set for -h/--help.
struct StatusArgs {
  bool help = false;
  bool why = false;      // --why: the failures' verdict instead of the table
  bool json = false;     // --json: as JSON (with --why: the verdict object; else the run as /api/runs gives it)
  std::string endpoint;  // "host:port" or "[v6]:port"
  std::string run_id;     // "" when neither --rdzv-id nor $PET_RDZV_ID names one: the server's only run
  LaunchConfig config;   // rdzv_conf (token, TLS) as the launcher reads it
};
Result<StatusArgs> ParseStatusArgs(const std::vector<std::string>& args, const Environment& env);

// The usage text of `ctrun status --help`.
std::string StatusHelpText();

// The nodes that left as unhealthy: their count, the budget and each one's
// report, indented; "" when none did.
std::string FormatUnhealthy(const rdzv::RunView& view);

// The table: a header line (run, server, round, state, size) and one line per
// node, then FormatUnhealthy.
std::string FormatStatus(const std::string& run_id, const std::string& endpoint, const rdzv::RunView& view);

// Runs `ctrun status ARGS`: prints the table or a one-line error; returns
// the exit code.
int RunStatusCommand(const std::vector<std::string>& args, const Environment& env);

}  // namespace ctrun::launcher
