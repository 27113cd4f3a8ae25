// Small string helpers the command-line parsers share (flag values, cgroup
// files). Pure functions over views; thread-safe. A returned view points
// into the argument and lives as long as it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctrun::launcher {

// `s` without leading and trailing whitespace (std::isspace: space, \t, \n,
// \v, \f, \r).
std::string_view Trim(std::string_view s);

// The parts of `s` between each `sep`, empty parts kept: "a,,b" gives
// {"a", "", "b"}; "" gives {""}.
std::vector<std::string_view> Split(std::string_view s, char sep);

// `s` in ASCII lower case.
std::string Lower(std::string_view s);

// The whole of `s` as a double, read as std::from_chars reads one: decimal
// or exponent form, "inf" and "nan" too, but no leading space, no '+' and
// no hexadecimal; nullopt otherwise and when it overflows or underflows to
// zero (a subnormal is kept). strtod in the C locale (ctrun sets no other),
// not from_chars: libstdc++'s from_chars for double was all that made the
// one-node ctrun load libm, ~0.14 ms of every start (docs/benchmarks.md,
// Launch).
std::optional<double> ParseDouble(std::string_view s);

}  // namespace ctrun::launcher
