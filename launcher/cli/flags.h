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

#include "base/result.h"
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
// abbreviations: see ResolveFlag), or nullptr.
const FlagSpec* FindFlag(std::string_view spelling);

// The row a typed long flag names, as torchrun's argparse reads it: an exact
// spelling, else a unique prefix ("--nproc" is --nproc-per-node; a prefix
// that matches several spellings of one row, "--nproc" matching both
// --nproc-per-node and --nproc_per_node, names that row). Errors, each one
// line naming what was typed and the fix: a prefix of several rows'
// spellings ("ambiguous flag '--n' could match --nnodes, --nproc-per-node,
// --node-rank (write more of it)"), and an unknown flag ("unknown flag
// '--nprocs' (did you mean --nproc-per-node? see ctrun --help)"). Short
// flags ("-r") are matched exactly.
Result<const FlagSpec*> ResolveFlag(std::string_view typed);

// One flag of a subcommand (`ctrun status`, `ctrun logs`): its spellings,
// the canonical first.
using SubcommandFlag = std::vector<std::string_view>;

// The index in `flags` of the flag `typed` names, by ResolveFlag's rule (an
// exact spelling, else a unique prefix of a long flag). An ambiguous prefix
// is InvalidArgument ("ctrun logs: ambiguous flag '--r' could match
// --rdzv-endpoint, --rdzv-id, --rdzv-conf, --rank (write more of it)"); no
// match is NotFound (the caller says what `command` takes).
Result<size_t> ResolveSubcommandFlag(std::string_view typed, const std::vector<SubcommandFlag>& flags,
                                     std::string_view command);

// The known spelling closest to `unknown` (ties: table order), or "" when
// none is close enough to be a plausible typo: within an edit distance of
// about a third of its length, or one edit from a spelling's start of the
// same length (a misspelt abbreviation: "--nprocs", "--standlone").
std::string ClosestSpelling(std::string_view unknown);

}  // namespace ctrun::launcher
