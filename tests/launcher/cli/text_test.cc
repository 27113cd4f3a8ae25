#include "launcher/cli/text.h"

#include <catch2/catch.hpp>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

namespace ctrun::launcher {
namespace {

// What std::from_chars makes of the whole of `s` (the reference ParseDouble
// stands in for).
std::optional<double> FromChars(const std::string& s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

TEST_CASE("ParseDouble reads a whole decimal number as std::from_chars does") {
  CHECK(ParseDouble("30") == 30.0);
  CHECK(ParseDouble("0.5") == 0.5);
  CHECK(ParseDouble("-2.25") == -2.25);
  CHECK(ParseDouble("1e2") == 100.0);
  CHECK(ParseDouble(".5") == 0.5);
  CHECK(std::isinf(*ParseDouble("inf")));
  CHECK(std::isnan(*ParseDouble("nan")));
  for (const char* bad : {"", " 1", "1 ", "+1", "0x10", "0X1p3", "1e", "1,5", "abc", "-", "1e400", "1e-400"}) {
    INFO(bad);
    CHECK_FALSE(ParseDouble(bad).has_value());
  }
  CHECK_FALSE(ParseDouble(std::string("1\0" "2", 3)).has_value());
}

TEST_CASE("ParseDouble agrees with std::from_chars on every case here") {
  const std::vector<std::string> cases = {"0", "7", "007", "1.", "3.14159", "-0", "1e-3", "2E+4", "12.5e1",
                                          "inf", "-infinity", "nan", "", " 1", "+1", "0x1", "1e", "1..2",
                                          "5s", "1e400", "1e-400", "4.9e-324", "1.7976931348623157e308"};
  for (const std::string& s : cases) {
    INFO(s);
    const std::optional<double> ours = ParseDouble(s), theirs = FromChars(s);
    REQUIRE(ours.has_value() == theirs.has_value());
    if (ours && !std::isnan(*ours)) CHECK(*ours == *theirs);
  }
}

}  // namespace
}  // namespace ctrun::launcher
