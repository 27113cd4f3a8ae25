#include "base/ft_wire/fields.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "base/quote.h"
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

std::string QuotePart(std::string_view s) { return QuoteText(s, 32); }

std::string Excerpt(std::string_view s, std::size_t shown) {
  std::string out = "'";
  out += s.substr(0, shown);
  if (s.size() > shown) out += "...";
  return out + "'";
}

}  // namespace ctrun::ft_wire
