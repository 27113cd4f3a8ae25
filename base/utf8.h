// UTF-8 validity, one sequence at a time: what a proto string field or a
// JSON string may hold.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ctrun {

// The length (1 to 4) of the valid UTF-8 sequence that starts at text[i], or
// 0 when none does: overlong forms, surrogates, code points above U+10FFFF
// and sequences cut by the end of `text` are not valid. `i < text.size()`.
size_t Utf8SequenceAt(std::string_view text, size_t i);

// `text` as valid UTF-8 (a byte that starts no valid sequence becomes '?'),
// cut to at most `bound` bytes, never inside a sequence.
std::string CutUtf8(std::string_view text, size_t bound);

}  // namespace ctrun
