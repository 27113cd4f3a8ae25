// ctrun's own log: spdlog's default logger on stderr ("[ctrun] warning: ..."),
// at the level LOGLEVEL names, as torchrun reads it. Set up first thing in
// main, before the command line is read, so that every later step logs
// through it. Thread model: main thread, before any other starts.
#pragma once

#include "base/status.h"
#include "launcher/cli/config.h"

namespace ctrun::launcher {

// LOGLEVEL as torchrun reads it (Python's level names; any case here). Empty
// or unset is info. Anything else is InvalidArgument (a usage error: torchrun
// dies on it with a ValueError traceback); the logger is set up either way.
Status SetUpLogging(const Environment& env);

}  // namespace ctrun::launcher
