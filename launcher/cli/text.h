// Small string helpers the command-line parsers share (flag values, cgroup
// files). Pure functions over views; thread-safe. A returned view points
// into the argument and lives as long as it.
#pragma once

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

}  // namespace ctrun::launcher
