// ParseDecimal: a whole text as a decimal number, strictly (flag values,
// wire fields). Pure.
#pragma once

#include <optional>
#include <string_view>

namespace ctrun {

// `s` as a double when all of it is one (strtod's syntax, but no leading
// white space, no '+', no hexadecimal, nothing after it); nullopt for
// anything else, and for a value out of range (one that overflows, or
// underflows to zero).
std::optional<double> ParseDecimal(std::string_view s);

}  // namespace ctrun
