// The checks on the names ctrun sends to the rendezvous and uses in paths:
// run ids (--rdzv-id, PET_RDZV_ID, the id taken from SLURM_JOB_ID) and node
// names (--local-addr, PET_LOCAL_ADDR, the address taken from
// SLURMD_NODENAME). They are checked where they enter, so that a bad one is
// refused at once with exit code 2 instead of failing every join until
// join_timeout, or failing later in a file name.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"

namespace ctrun::launcher {

// The longest run id, in bytes (docs/launcher.md, "Run ids and node names").
inline constexpr size_t kMaxRunIdBytes = 128;
// The longest node name (--local-addr), in bytes: a DNS name's longest.
inline constexpr size_t kMaxNodeNameBytes = 253;

// OK when `v` is 1..kMaxRunIdBytes bytes of UTF-8 with no control character
// (launcher/cli/text.h, IsControl). Errors: InvalidArgument, "<what is
// wrong> (<the fix>)", quoting none of `v` (the caller names the flag and
// quotes the value with Quote).
Status CheckRunId(std::string_view v);

// The same for a node name of 0..kMaxNodeNameBytes bytes ("" is no name:
// the flag's default applies).
Status CheckNodeName(std::string_view v);

}  // namespace ctrun::launcher
