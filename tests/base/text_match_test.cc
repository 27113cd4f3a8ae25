// Case-insensitive matching (base/text_match.h).
#include "base/text_match.h"

#include <catch2/catch.hpp>

namespace ctrun {
namespace {

TEST_CASE("text match: a lower-case needle in any case, anywhere") {
  CHECK(ContainsFolded("RuntimeError: Connection RESET by peer", "connection reset"));
  CHECK(ContainsFolded("abc", ""));
  CHECK(ContainsFolded("abc", "abc"));
  CHECK(!ContainsFolded("ab", "abc"));
  CHECK(!ContainsFolded("", "a"));
}

TEST_CASE("text match: a whole word, bounded by the text's ends or by other characters") {
  CHECK(ContainsWordFolded("loss is NaN", "nan"));
  CHECK(ContainsWordFolded("nan", "nan"));
  CHECK(ContainsWordFolded("grad=inf.", "inf"));
  CHECK(!ContainsWordFolded("information", "inf"));
  CHECK(!ContainsWordFolded("nanoseconds", "nan"));
  CHECK(!ContainsWordFolded("is_nan", "nan"));
  CHECK(ContainsWordFolded("info inf", "inf"));  // the second one counts
}

}  // namespace
}  // namespace ctrun
