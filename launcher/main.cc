// ctrun and ctrun-full: launch and supervise one node's PyTorch workers, as torchrun
// does. Built twice (launcher/CMakeLists.txt): with CTRUN_ONE_NODE_ONLY, the
// one-node `ctrun`, which hands the rest to ctrun-full (launcher/app/handoff.h).
//
// The composition root of both: parse (launcher/cli) -> resolve
// (launcher/app/resolved_launch.h) -> wire and run (launcher/app/wiring.h).
// Each step returns a Status or a Result; a failure ends the program as
// launcher/app/exit_on_failure.h says (exit 2 for the user's input, else 1).
// What differs between the two programs is here, under CTRUN_ONE_NODE_ONLY,
// and in the rendezvous each links (launcher/rdzv/setup.h).
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "launcher/app/exit_on_failure.h"
#include "launcher/app/handoff.h"
#include "launcher/app/logging.h"
#include "launcher/app/resolved_launch.h"
#include "launcher/app/wiring.h"
#include "launcher/cli/config.h"
#include "launcher/cli/exit_codes.h"
#if !CTRUN_ONE_NODE_ONLY
#include "launcher/app/logs_command.h"
#include "launcher/app/status_command.h"
#endif

int main(int argc, char** argv) {
  using namespace ctrun;
  using namespace ctrun::launcher;
  ::signal(SIGPIPE, SIG_IGN);
  Environment env = CurrentEnvironment();
  if (Status s = SetUpLogging(env); !s.ok()) return ExitOnFailure(s);

  const std::vector<std::string> args(argv + 1, argv + argc);
  // `ctrun status ...`: a query, not a launch (a script named "status" runs as ./status).
  if (!args.empty() && args[0] == "status") {
#if CTRUN_ONE_NODE_ONLY
    HandOffToFull(argv, "ctrun status");
    return kExitFailure;
#else
    return RunStatusCommand({args.begin() + 1, args.end()}, env);
#endif
  }
  // `ctrun logs ...`: every node's shared worker output (--share-logs), likewise.
  if (!args.empty() && args[0] == "logs") {
#if CTRUN_ONE_NODE_ONLY
    HandOffToFull(argv, "ctrun logs");
    return kExitFailure;
#else
    return RunLogsCommand({args.begin() + 1, args.end()}, env);
#endif
  }
  Result<ParsedArgs> parsed = ParseCommandLine(args, env);
  if (!parsed.ok()) return ExitOnFailure(AsUsageError(parsed.status()));
  if (parsed->action != ParseAction::kRun) {
    std::fputs(parsed->text.c_str(), stdout);
    return kExitSuccess;
  }
#if CTRUN_ONE_NODE_ONLY
  // Before the warnings: ctrun-full parses the same line again and says them.
  if (!parsed->config.local_rendezvous() || parsed->config.ft) {
    HandOffToFull(argv, WhatNeedsFull(parsed->config));
    return kExitFailure;
  }
#endif
  Result<ResolvedLaunch> launch = ResolveLaunch(std::move(*parsed), std::move(env));
  if (!launch.ok()) return ExitOnFailure(launch.status());
  Result<std::unique_ptr<Wiring>> wiring = Wiring::Start(std::move(*launch));
  if (!wiring.ok()) return ExitOnFailure(wiring.status());
  // A failure is reported with the graph still up; destroying it ends the guard.
  if (Status s = (*wiring)->Wire(); !s.ok()) return ExitOnFailure(s);
  return (*wiring)->Run();
}
