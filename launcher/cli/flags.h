// The table of ctrun's command-line flags: one row per flag, torchrun's and
// ctrun's own. Parsing, PET_* lookup (launcher/cli/config.cc) and --help
// (launcher/cli/help_text.h) are all driven by this table; nothing else knows
// a flag's spelling. The rows' value parsers are in launcher/cli/flag_values.h.
//
// Plain static data plus pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "launcher/cli/launch_config.h"

namespace ctrun::launcher {

enum class FlagKind {
  kValue,   // takes one value: "--flag VALUE", "--flag=VALUE", short "-rVALUE"
  kSwitch,  // torchrun's "check_env" boolean: present = on; PET_* is bool(int(value))
  kAction,  // --help / --version: stops parsing
};

// --help sections, in torchrun's order, then ctrun's own.
enum class HelpGroup { kSize, kRendezvous, kLaunch, kLogs, kCtrun };

// Checks `value` and stores it into `config`. On a bad value returns
// InvalidArgument whose message is "<what is wrong> (<the fix>)"; the caller
// prefixes it with the flag or PET_* name and the value. For a kSwitch the
// value is "1" or "0"; a kAction has no apply.
using ApplyFn = Status (*)(std::string_view value, LaunchConfig& config);

struct FlagSpec {
  std::string_view name;                    // canonical spelling, e.g. "--nproc-per-node"
  std::vector<std::string_view> spellings;  // every accepted spelling (name included), help order
  std::string_view env;                     // "PET_NPROC_PER_NODE"; "" = no env fallback
  const char* default_text;                 // applied when neither flag nor env is given;
                                            // nullptr = no default (the field stays unset)
  FlagKind kind;
  ApplyFn apply;                            // nullptr only for kAction
  std::string_view metavar;                 // value placeholder in --help ("" for switches)
  std::string_view help;                    // one sentence or two, no trailing newline
  HelpGroup group;
};

// The table, in --help order. The reference lives for the whole program.
const std::vector<FlagSpec>& Flags();

// The row that has `spelling` among its spellings (exact match, no
// abbreviations), or nullptr.
const FlagSpec* FindFlag(std::string_view spelling);

// The known spelling closest to `unknown` by edit distance (ties: table
// order), or "" when none is close enough to be a plausible typo.
std::string ClosestSpelling(std::string_view unknown);

}  // namespace ctrun::launcher
