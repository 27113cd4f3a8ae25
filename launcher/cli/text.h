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

// `s` seconds as whole seconds, rounded up, never below 0 (for "giving up
// in N s"). Without libm's ceil: ctrun links only libc.
inline long SecondsUp(double s) {
  if (!(s > 0)) return 0;
  const long whole = static_cast<long>(s);
  return whole < s ? whole + 1 : whole;
}

// The first character of `s` if it starts with well-formed UTF-8 (shortest
// form, no surrogate, at most U+10FFFF): its code point in `cp` and its
// length in bytes (1..4). 0 when `s` is empty or does not start with one.
size_t DecodeUtf8(std::string_view s, char32_t& cp);

// A control character: C0 (U+0000..U+001F), DEL (U+007F) or C1
// (U+0080..U+009F).
bool IsControl(char32_t cp);

// The longest run of user input an error message quotes, in bytes.
inline constexpr size_t kMaxQuotedBytes = 200;

// `s` made safe to quote in a one-line message: well-formed UTF-8 that is no
// control character is kept, a backslash is doubled, and any other byte is
// written as \xHH (so a message never carries a newline, a terminal escape
// or bytes that are not UTF-8). Cut before the output would pass `max_bytes`
// bytes, then ending with "…(N bytes)" where N is the length of `s`. The
// caller writes the quotes around it.
std::string Quote(std::string_view s, size_t max_bytes = kMaxQuotedBytes);

// A part of a value the same message already quotes whole (an item of a
// list, a key of --rdzv-conf): Quote cut at kMaxQuotedPartBytes, so that a
// line quotes little more than kMaxQuotedBytes of input in all.
inline constexpr size_t kMaxQuotedPartBytes = 32;
inline std::string QuotePart(std::string_view s) { return Quote(s, kMaxQuotedPartBytes); }
}  // namespace ctrun::launcher
