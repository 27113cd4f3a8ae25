#include "launcher/cli/text.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace ctrun::launcher {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<double> ParseDouble(std::string_view s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front())) || s.front() == '+' ||
      s.find_first_of("xX") != std::string_view::npos) {
    return std::nullopt;
  }
  const std::string text(s);  // NUL-terminated; an embedded NUL ends the number short
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  // Out of range: what overflows or underflows to zero (from_chars keeps a
  // subnormal, for which strtod sets ERANGE too).
  if (errno == ERANGE && (v == 0 || std::isinf(v))) return std::nullopt;
  return v;
}

}  // namespace ctrun::launcher
