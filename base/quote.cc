#include "base/quote.h"

#include "base/utf8.h"

namespace ctrun {

std::string QuoteText(std::string_view s, std::size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t len = Utf8SequenceAt(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    // A control character: C0, DEL, or C1 (U+0080..U+009F: 0xC2 0x80..0x9F).
    const bool control = (len == 1 && (c < 0x20 || c == 0x7f)) ||
                         (len == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) <= 0x9F);
    std::string piece;
    if (len == 0 || control) {
      len = 1;
      piece = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    } else if (c == '\\') {
      piece = "\\\\";
    } else {
      piece = std::string(s.substr(i, len));
    }
    if (out.size() + piece.size() > max_bytes) return out + "\u2026(" + std::to_string(s.size()) + " bytes)";
    out += piece;
    i += len;
  }
  return out;
}

}  // namespace ctrun
