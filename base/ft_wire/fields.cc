#include "base/ft_wire/fields.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "base/utf8.h"

namespace ctrun::ft_wire {

std::vector<std::string_view> SplitAt(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

std::vector<std::string_view> SplitWords(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t end = i;
    while (end < line.size() && line[end] != ' ') ++end;
    if (end > i) fields.push_back(line.substr(i, end - i));
    i = end;
  }
  return fields;
}

std::optional<double> ParseDecimal(std::string_view s) {
  if (s.empty() || s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\v' ||
      s.front() == '\f' || s.front() == '\r' || s.front() == '+' || s.find_first_of("xX") != std::string_view::npos) {
    return std::nullopt;
  }
  const std::string text(s);  // NUL-terminated; an embedded NUL ends the number short
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  if (errno == ERANGE && (v == 0 || std::isinf(v))) return std::nullopt;
  return v;
}

std::string QuotePart(std::string_view s) {
  constexpr std::size_t kMaxBytes = 32;
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
    if (out.size() + piece.size() > kMaxBytes) return out + "\u2026(" + std::to_string(s.size()) + " bytes)";
    out += piece;
    i += len;
  }
  return out;
}

std::string Excerpt(std::string_view s) {
  constexpr std::size_t kShown = 40;
  std::string out = "'";
  out += s.substr(0, kShown);
  if (s.size() > kShown) out += "...";
  return out + "'";
}

}  // namespace ctrun::ft_wire
