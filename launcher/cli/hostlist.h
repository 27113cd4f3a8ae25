// Slurm hostlist expressions ("n[1-3,5]", "gpu[01-02],cpu7") expanded into
// host names, as SLURM_JOB_NODELIST writes them.
//
// Grammar (Slurm's): hosts are separated by commas or whitespace outside
// brackets; a host is literal text with any number of bracket groups, each a
// comma list of numbers or LO-HI ranges. Several groups multiply out, the
// leftmost varying slowest ("r[1-2]n[1-2]" = r1n1 r1n2 r2n1 r2n2). A range is
// zero-padded to the width of LO when LO has a leading zero ("[08-10]" = 08
// 09 10); "[1-10]" is not padded. Duplicates are kept, in order.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ctrun::launcher {

// The most names ExpandHostlist produces; larger lists are an error rather
// than a memory blow-up on a typo such as "n[1-999999999]".
inline constexpr size_t kMaxHostlistHosts = 1'000'000;

// Every host of `hostlist`, in order. Errors (InvalidArgument, a message
// "<what is wrong> (<the fix>)" for the caller to prefix with the variable
// name): empty list or empty host, unbalanced or nested brackets, an empty
// group or range item, a non-numeric bound, LO > HI, or more than
// kMaxHostlistHosts names.
Result<std::vector<std::string>> ExpandHostlist(std::string_view hostlist);

// The first host of `hostlist`, with the same checks as ExpandHostlist.
Result<std::string> FirstHost(std::string_view hostlist);

}  // namespace ctrun::launcher
