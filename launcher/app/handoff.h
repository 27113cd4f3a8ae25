// The hand-off from the one-node `ctrun` to `ctrun-full` (the two programs:
// launcher/rdzv/remote_setup.h). `ctrun` calls it for a launch of several
// nodes and for `ctrun status`, after parsing the command line and before
// it starts anything (no guard, no store, no directory, no worker), so that
// ctrun-full starts from the same state: the same pid, arguments and
// environment, and no descriptor of ctrun's left open.
#pragma once

#include <string>

#include "launcher/cli/config.h"

namespace ctrun::launcher {

// ctrun-full's path: beside this program (/proc/self/exe's directory).
std::string FullProgramPath();

// Replaces this process with ctrun-full, given `argv` as it is. Returns only
// when that fails, after one line on stderr that names `what` (what needs
// ctrun-full, e.g. "a launch of 2 nodes (--nnodes 2)"), the path, the error
// and the fix; the caller exits with kExitFailure.
void HandOffToFull(char** argv, const std::string& what);

// HandOffToFull's `what` for a launch that is not config.local_rendezvous(),
// or that has --ft-replicas: "a launch of several nodes (--nnodes 2:4)", "a
// launch with --rdzv-backend c10d and --rdzv-endpoint" for one node, or "a
// fault-tolerant launch (--ft-replicas)".
std::string WhatNeedsFull(const LaunchConfig& config);

}  // namespace ctrun::launcher
