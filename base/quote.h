// QuoteText: a piece of untrusted text made safe to quote in a one-line
// message (an error naming a bad flag value, a wire line), cut short. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ctrun {

// `s` with well-formed UTF-8 that is no control character kept, a backslash
// doubled, any other byte (a control character, C0, DEL or C1, or a byte of
// malformed UTF-8) as \xHH; once more than `max_bytes` would be written,
// what fits and then "…(N bytes)", N the input's size.
std::string QuoteText(std::string_view s, std::size_t max_bytes);

}  // namespace ctrun
