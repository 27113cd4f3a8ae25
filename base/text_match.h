// Case-insensitive matching of ASCII text: the error messages and log lines
// that failures are read from; and such a text made safe for a terminal.
#pragma once

#include <string>
#include <string_view>

namespace ctrun {

// Whether `text` holds `lower_needle` (lower case) in any case.
bool ContainsFolded(std::string_view text, std::string_view lower_needle);

// The same, as a whole word: the characters on either side, if any, are
// neither letters, digits nor '_' ("inf" in "grad is inf", not in "info").
bool ContainsWordFolded(std::string_view text, std::string_view lower_word);

// `text` safe for a terminal: control characters (escape sequences
// included) become '?'.
std::string Printable(std::string_view text);

}  // namespace ctrun
