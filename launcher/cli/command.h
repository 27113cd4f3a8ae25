// The worker command line: which interpreter, which script, which argv.
//
// torchrun's forms, with one ctrun choice: --run-path (torchrun's in-process
// runpy.run_path) runs as `python -u SCRIPT`, an ordinary python launch.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "launcher/cli/config.h"
#include "launcher/cli/launch_config.h"

namespace ctrun::launcher {

// Fills config.python_exec and checks that the script can be started.
// Reads the file system (stat/access) and `env` (PYTHON_EXEC, PATH; an unset
// PATH means "/usr/local/bin:/bin:/usr/bin"); does not read the process env.
//
// python_exec is $PYTHON_EXEC, else the first executable python3 on PATH. A
// name without '/' is looked up on PATH, so python_exec is always a path
// (usable with execv). With --no-python (and no --run-path) python is not
// needed: python_exec is filled when found and left empty otherwise.
//
// Script checks, by mode (config.script itself is never changed, so the
// worker's argv[0] is what the user typed):
//  - python / --run-path: the file must exist and be readable;
//  - -m: not checked (a module name);
//  - --no-python: a script without '/' is looked up on PATH; it must exist,
//    be a regular file and be executable.
// Errors: NotFound when python or the script does not exist; InvalidArgument
// when it exists but cannot be read / executed. Messages name the file and
// the fix.
Status ResolveCommand(LaunchConfig& config, const Environment& env);

// The argv of worker `local_rank`:
//   python mode:  <python_exec> -u [-m] <script> <script_args...>
//   --run-path:   <python_exec> -u <script> <script_args...>
//   --no-python:  <script> <script_args...>
// Every literal "${local_rank}" in script_args is replaced by the local rank
// (unlike torchrun's string.Template, "$local_rank" and "$$" are left alone).
// Needs ResolveCommand to have filled python_exec for the python forms.
std::vector<std::string> BuildWorkerArgv(const LaunchConfig& config, int local_rank);

}  // namespace ctrun::launcher
