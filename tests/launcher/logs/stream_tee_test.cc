#include "launcher/logs/stream_tee.h"

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

TEST_CASE("Whole lines get the prefix, a partial line waits for its end") {
  LinePrefixer p("[default0]:");
  std::string out;
  p.Feed("hello\nwor", &out);
  CHECK(out == "[default0]:hello\n");
  out.clear();
  p.Feed("ld\n", &out);
  CHECK(out == "[default0]:world\n");
}

TEST_CASE("Several lines in one chunk are each prefixed") {
  LinePrefixer p("[r1]:");
  std::string out;
  p.Feed("a\nb\n\nc\n", &out);
  CHECK(out == "[r1]:a\n[r1]:b\n[r1]:\n[r1]:c\n");
}

TEST_CASE("A last line without newline is completed at the end") {
  LinePrefixer p("[x]:");
  std::string out;
  p.Feed("no newline", &out);
  CHECK(out.empty());
  p.Finish(&out);
  CHECK(out == "[x]:no newline\n");
  out.clear();
  p.Finish(&out);
  CHECK(out.empty());
}

TEST_CASE("The prefix template expands role, rank and local rank") {
  CHECK(ExpandLinePrefix("", "default", 5, 1) == "[default1]:");
  CHECK(ExpandLinePrefix("[${role_name}/${rank}/${local_rank}] ", "trainer", 5, 1) ==
        "[trainer/5/1] ");
  CHECK(ExpandLinePrefix("${rank}${rank}|", "r", 3, 0) == "33|");
}

}  // namespace
}  // namespace ctrun::launcher
