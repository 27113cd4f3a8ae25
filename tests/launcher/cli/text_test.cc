#include "launcher/cli/text.h"

#include <catch2/catch.hpp>
#include <limits>
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

TEST_CASE("SecondsUp rounds up to whole seconds, never below 0") {
  CHECK(SecondsUp(589.2) == 590);
  CHECK(SecondsUp(5) == 5);
  CHECK(SecondsUp(0.001) == 1);
  CHECK(SecondsUp(0) == 0);
  CHECK(SecondsUp(-4) == 0);
  CHECK(SecondsUp(std::numeric_limits<double>::quiet_NaN()) == 0);
}

TEST_CASE("Quote keeps printable UTF-8 and escapes every other byte") {
  CHECK(Quote("job42") == "job42");
  CHECK(Quote("ex\xc3\xa9" "cution") == "ex\xc3\xa9" "cution");  // é stays
  CHECK(Quote("a\nb") == "a\\x0ab");
  CHECK(Quote("adv\xff") == "adv\\xff");
  CHECK(Quote("\x1b[31m") == "\\x1b[31m");
  CHECK(Quote("c:\\x") == "c:\\\\x");             // a typed backslash doubled
  CHECK(Quote("\xc2\x85") == "\\xc2\\x85");          // C1 control (NEL)
  CHECK(Quote("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
  CHECK(Quote("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
  CHECK(Quote(std::string("a\0b", 3)) == "a\\x00b");
}

TEST_CASE("Quote cuts long input and says how long it was") {
  CHECK(Quote(std::string(200, 'x')) == std::string(200, 'x'));
  CHECK(Quote(std::string(201, 'x')) == std::string(200, 'x') + "\u2026(201 bytes)");
  CHECK(Quote(std::string(100000, '\n')) == [] {
    std::string s;
    for (int i = 0; i < 50; ++i) s += "\\x0a";
    return s + "\u2026(100000 bytes)";
  }());
  // A multi-byte character is never cut in half.
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xe2\x82\xac";
  const std::string q = Quote(euros);
  CHECK(q.substr(0, 198) == euros.substr(0, 198));
  CHECK(q.substr(198) == "\u2026(300 bytes)");
  CHECK(Quote("abcdef", 3) == "abc\u2026(6 bytes)");
}

TEST_CASE("DecodeUtf8 reads well-formed UTF-8 only") {
  char32_t cp = 0;
  CHECK(DecodeUtf8("A", cp) == 1);
  CHECK(cp == U'A');
  CHECK(DecodeUtf8("\xf0\x9f\x98\x80", cp) == 4);
  CHECK(cp == 0x1F600);
  CHECK(DecodeUtf8("", cp) == 0);
  CHECK(DecodeUtf8("\x80", cp) == 0);              // a lone continuation byte
  CHECK(DecodeUtf8("\xe2\x82", cp) == 0);          // cut short
  CHECK(DecodeUtf8("\xf4\x90\x80\x80", cp) == 0);  // above U+10FFFF
  CHECK(DecodeUtf8("\xe0\x80\xaf", cp) == 0);      // overlong
  CHECK(IsControl(0x7f));
  CHECK(IsControl(0x85));
  CHECK_FALSE(IsControl(0xa0));
}

}  // namespace
}  // namespace ctrun::launcher
