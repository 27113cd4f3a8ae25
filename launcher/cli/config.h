// Reading ctrun's command line and environment into a validated LaunchConfig.
//
// The only reader of argv and PET_* (torchrun's "env default" variables),
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT and TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE.
// Flags are described by the table in launcher/cli/flags.h. Parsing follows
// torchrun's argparse: options before the script, then the script, then
// everything else passed to the script unchanged.
//
// The parser is hand-written rather than CLI11: argparse's REMAINDER (every
// token after the script, flags included, belongs to the script), PET_*
// fallback with torchrun's precedence and one-line messages that name the
// spelling the user typed are each a workaround in CLI11, and a loop over
// the table is shorter.
//
// --signals-to-handle takes SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and
// SIGUSR2, case-insensitive, the SIG prefix optional ("term,usr1"); repeats
// are dropped.
//
// Long flags may be abbreviated to a unique prefix, as argparse allows
// ("--nproc 2", "--standal"; flags.h, ResolveFlag): a prefix of several flags
// is refused naming them, and an unknown flag gets a "did you mean". A
// prefix that matches both spellings of one flag (--nproc-per-node and
// --nproc_per_node) is that flag. Deliberate difference from torchrun:
// combined short flags ("-mr3") are not accepted ("-r3", "-r=3" and "-r 3"
// are).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "launcher/cli/launch_config.h"

namespace ctrun::launcher {

using Environment = std::map<std::string, std::string>;

// A copy of this process's environment (environ). Not thread-safe against
// concurrent setenv/putenv.
Environment CurrentEnvironment();

enum class ParseAction { kRun, kHelp, kVersion };

struct ParsedArgs {
  ParseAction action = ParseAction::kRun;
  std::string text;  // help or version text (ends with a newline); "" for kRun
  LaunchConfig config;
  // One line each, for the caller to print before starting (e.g. --standalone
  // ignoring an explicit --rdzv-endpoint). ParseCommandLine prints nothing.
  std::vector<std::string> warnings;
};

// Parses `args` (argv without argv[0]) with `env` as the environment.
// Reads only its arguments (and the random source for --standalone's run
// id), except inside a Slurm job step (launcher/cli/slurm_env.h), where it may
// resolve node names (getaddrinfo) and run `scontrol show node`.
//
// Each setting comes from the explicit flag, else its PET_* variable, else
// its SLURM_* default inside a Slurm step, else the table default; PET_* values pass the same checks as flags, and on/off
// flags read PET_* as torchrun does, bool(int(value)): any integer, 0 is off.
// --shutdown-timeout (PET_SHUTDOWN_TIMEOUT) wins over
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT, which wins over 30 s.
//
// On success with action kRun, `config` is complete except for what needs the
// machine or the file system:
//  - nproc_per_node is only final when nproc_kind is kNumber; auto/cpu/gpu
//    are resolved by ResolveNprocPerNode (launcher/cli/nproc.h);
//  - python_exec is empty and the script is unchecked; see ResolveCommand
//    (launcher/cli/command.h).
// Derived fields:
//  - rdzv_host/rdzv_port: the parsed endpoint. c10d (and grpc) with no
//    endpoint or no port uses localhost / 29400, etcd* 2379. The static
//    backend with no endpoint uses master_addr:master_port; with an endpoint
//    the port is required. --standalone gives localhost:0, where port 0 means
//    "bind a free port"; an endpoint written with port 0 (HOST:0) means the
//    same for the agent that hosts the rendezvous (ResolveRendezvous in
//    launcher/rdzv/resolve.h refuses it elsewhere); otherwise rdzv_port is
//    1..65535.
//  - master_port_given / node_rank_given: the flag or its PET_* was set.
//  - rdzv_backend: --rdzv-backend grpc is stored as kC10d.
// -h/--help and --version before the script return kHelp/kVersion with
// `text` set and nothing else checked.
//
// Errors (all InvalidArgument, one line naming the flag or variable, the
// value and the fix): an unknown flag (with the closest spelling), a missing
// flag value, a bad value, no script, or an inconsistent combination
// (--node-rank >= max nodes, --no-python with -m, --run-path with a relative
// script, static endpoint without port).
Result<ParsedArgs> ParseCommandLine(const std::vector<std::string>& args, const Environment& env);

}  // namespace ctrun::launcher
