#include "base/text_match.h"

#include <cctype>

namespace ctrun {

namespace {

bool FoldedAt(std::string_view text, size_t i, std::string_view lower) {
  for (size_t k = 0; k < lower.size(); ++k) {
    if (std::tolower(static_cast<unsigned char>(text[i + k])) != static_cast<unsigned char>(lower[k])) return false;
  }
  return true;
}

bool WordByte(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

bool ContainsFolded(std::string_view text, std::string_view lower_needle) {
  for (size_t i = 0; i + lower_needle.size() <= text.size(); ++i) {
    if (FoldedAt(text, i, lower_needle)) return true;
  }
  return false;
}

bool ContainsWordFolded(std::string_view text, std::string_view lower_word) {
  for (size_t i = 0; i + lower_word.size() <= text.size(); ++i) {
    if (!FoldedAt(text, i, lower_word)) continue;
    const size_t end = i + lower_word.size();
    if ((i == 0 || !WordByte(text[i - 1])) && (end == text.size() || !WordByte(text[end]))) return true;
  }
  return false;
}

std::string Printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

}  // namespace ctrun
