#include "ft_floor_frames.h"

#include <catch2/catch.hpp>
#include <string>

using ft_floor_load::AppendFrame;
using ft_floor_load::NextFrame;

TEST_CASE("a floor frame is its length, its step and filler up to its size") {
  std::string out;
  AppendFrame(out, 258, 89);
  REQUIRE(out.size() == 4 + 89);
  CHECK(out.substr(0, 6) == std::string("\x59\0\0\0\x02\x01", 6));  // 89 LE, then 258 LE
  size_t off = 0;
  int64_t step = -1;
  CHECK(NextFrame(out, &off, &step) == 1);
  CHECK(step == 258);
  CHECK(off == out.size());
}

TEST_CASE("frames back to back are read one at a time, a partial one waits") {
  std::string in;
  AppendFrame(in, 1, 47);
  AppendFrame(in, 2, 8);
  const std::string whole = in;
  in.pop_back();  // the second frame not whole yet
  size_t off = 0;
  int64_t step = 0;
  CHECK(NextFrame(in, &off, &step) == 1);
  CHECK(step == 1);
  const size_t first_end = off;
  CHECK(NextFrame(in, &off, &step) == 0);
  CHECK(off == first_end);
  CHECK(NextFrame(whole, &off, &step) == 1);
  CHECK(step == 2);
  CHECK(NextFrame(whole, &off, &step) == 0);  // nothing left
}

TEST_CASE("a frame length out of its bounds is malformed") {
  size_t off = 0;
  int64_t step = 0;
  CHECK(NextFrame(std::string("\x07\0\0\0", 4), &off, &step) == -1);          // below the step's 8 bytes
  CHECK(NextFrame(std::string("\x01\x10\0\0", 4), &off, &step) == -1);        // 4097
  CHECK(NextFrame(std::string("\x00\x10\0\0", 4), &off, &step) == 0);         // 4096: fine, not whole yet
  CHECK(off == 0);
}
