// How ctrun and ctrun-full end when a step of main fails (parse, resolve,
// wire: launcher/main.cc). Every step returns a Status whose code says which
// of the two ways out it takes; its message is printed as it is:
//   InvalidArgument  the user's input is wrong and nothing was started: one
//                    line "ctrun: error: <message>" on stderr, exit 2
//                    (kExitUsage), as torchrun's argparse does;
//   any other code   a failure at run time: "[ctrun] error: <message>"
//                    through ctrun's log (launcher/app/logging.h), exit 1
//                    (kExitFailure).
// A step whose failures all belong to one way, whatever the callee's code
// (a log directory that cannot be made is the user's to fix), says so with
// AsUsageError or AsRunFailure. Thread model: main thread.
#pragma once

#include "base/status.h"

namespace ctrun::launcher {

// Prints `failure` (not OK) as above and returns the exit code.
int ExitOnFailure(const Status& failure);

// `s` with its message, as a usage error (InvalidArgument). OK stays OK.
Status AsUsageError(const Status& s);
// `s` with its message, as a failure at run time (never InvalidArgument).
// OK stays OK.
Status AsRunFailure(const Status& s);

}  // namespace ctrun::launcher
