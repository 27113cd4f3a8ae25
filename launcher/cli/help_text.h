// The texts of `ctrun --help` and `ctrun --version`. --help is generated from
// the flag table (launcher/cli/flags.h), so a new row is documented by
// being added. Pure functions; thread-safe.
#pragma once

#include <string>

namespace ctrun::launcher {

// The full --help text: usage line, then one section per HelpGroup listing
// each flag's spellings, metavar, PET_* name, default and help, then the
// other environment variables ctrun reads.
std::string HelpText();

// "ctrun <version>\n" for --version.
std::string VersionText();

}  // namespace ctrun::launcher
