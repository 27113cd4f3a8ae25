// The fields the FT line protocol is made of (docs/fault-tolerance.md,
// "Worker <-> agent: a local socket"): the longest line, splitting a line
// into its fields, whole numbers and decimals read strictly, and a field
// quoted in an error message. Shared by the lines of both sides
// (worker_lines.h, agent_lines.h, host_port.h).
//
// Pure functions over views, no I/O, thread-safe. A returned view points
// into the argument and lives as long as it.
#pragma once

#include <charconv>
#include <cstddef>
#include <optional>

#include "base/decimal.h"
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace ctrun::ft_wire {

// The longest line either side sends, '\n' included.
inline constexpr std::size_t kMaxLineBytes = 4096;

// The parts of `s` between each `sep`, empty parts kept: "a,,b" gives
// {"a", "", "b"}; "" gives {""}.
std::vector<std::string_view> SplitAt(std::string_view s, char sep);

// The words of `line` between runs of spaces (no empty word).
std::vector<std::string_view> SplitWords(std::string_view line);

// The whole of `s` as an integer of type Int (decimal, no sign but '-', no
// space): false when it is empty, has anything else, or overflows Int.
template <typename Int>
bool ParseWhole(std::string_view s, Int& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// `s` made safe to quote in a one-line message, cut short: well-formed UTF-8
// that is no control character is kept, a backslash is doubled, any other
// byte is written \xHH; past 32 bytes it ends "…(N bytes)". The caller
// writes the quotes around it.
std::string QuotePart(std::string_view s);

// `s` in single quotes, its first `shown` bytes, then "..." when it is longer.
std::string Excerpt(std::string_view s, std::size_t shown = 40);

}  // namespace ctrun::ft_wire
