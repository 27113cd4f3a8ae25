#include "base/decimal.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ctrun {

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

}  // namespace ctrun
