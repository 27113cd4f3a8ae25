#include "launcher/logs/line_dedup.h"

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

using std::chrono::milliseconds;

const TimePoint kT0{};

std::string Prefix(int rank) { return "[default" + std::to_string(rank) + "]:"; }

TEST_CASE("Rank ranges are written with dashes and commas") {
  CHECK(FormatRankRanges({}) == "");
  CHECK(FormatRankRanges({3}) == "3");
  CHECK(FormatRankRanges({0, 1, 2, 3, 4, 5, 6, 7}) == "0-7");
  CHECK(FormatRankRanges({0, 1, 2, 5}) == "0-2,5");
  CHECK(FormatRankRanges({0, 2, 4, 5}) == "0,2,4-5");
}

TEST_CASE("Identical lines from six ranks within the window print once") {
  LineDedup d;
  std::string out;
  int ms = 0;
  for (int r : {3, 0, 5, 1, 4, 2}) d.Add(r, Prefix(r), "step 1 done\n", kT0 + milliseconds(ms++), &out);
  CHECK(out.empty());
  CHECK(d.NextDeadline() == kT0 + milliseconds(100));
  d.Flush(kT0 + milliseconds(99), &out);
  CHECK(out.empty());
  d.Flush(kT0 + milliseconds(100), &out);
  CHECK(out == "[ranks 0-5]: step 1 done\n");
  CHECK(d.empty());
  CHECK_FALSE(d.NextDeadline());
}

TEST_CASE("Lines that differ print as today, each with its rank's prefix") {
  LineDedup d;
  std::string out;
  for (int r = 0; r < 6; ++r) d.Add(r, Prefix(r), "rank " + std::to_string(r) + "\n", kT0, &out);
  d.FlushAll(&out);
  CHECK(out ==
        "[default0]:rank 0\n[default1]:rank 1\n[default2]:rank 2\n"
        "[default3]:rank 3\n[default4]:rank 4\n[default5]:rank 5\n");
}

TEST_CASE("A line seen by one rank only keeps its usual prefix, even an empty one") {
  LineDedup d;
  std::string out;
  d.Add(2, "", "plain\n", kT0, &out);
  d.Add(3, "", "plain\n", kT0, &out);
  d.Add(4, "", "alone\n", kT0, &out);
  d.FlushAll(&out);
  CHECK(out == "[ranks 2-3]: plain\nalone\n");
}

TEST_CASE("A line after the window closed starts a new one") {
  LineDedup d;
  std::string out;
  d.Add(0, Prefix(0), "x\n", kT0, &out);
  d.Add(1, Prefix(1), "x\n", kT0 + milliseconds(150), &out);  // flushes the first
  CHECK(out == "[default0]:x\n");
  d.Add(2, Prefix(2), "x\n", kT0 + milliseconds(200), &out);
  d.Flush(kT0 + milliseconds(250), &out);
  CHECK(out == "[default0]:x\n[ranks 1-2]: x\n");
}

TEST_CASE("A rank that prints the same line twice gets it twice") {
  LineDedup d;
  std::string out;
  d.Add(0, Prefix(0), "again\n", kT0, &out);
  d.Add(0, Prefix(0), "again\n", kT0, &out);
  d.Add(1, Prefix(1), "again\n", kT0, &out);
  d.Add(1, Prefix(1), "again\n", kT0, &out);
  d.FlushAll(&out);
  CHECK(out == "[ranks 0-1]: again\n[ranks 0-1]: again\n");
}

TEST_CASE("A rank's own lines keep their order") {
  LineDedup d;
  std::string out;
  // Rank 0 prints B; rank 1 prints A then B. Rank 1's B may not join rank
  // 0's B, which leaves before rank 1's A.
  d.Add(0, Prefix(0), "B\n", kT0, &out);
  d.Add(1, Prefix(1), "A\n", kT0, &out);
  d.Add(1, Prefix(1), "B\n", kT0, &out);
  // Rank 0's A may join rank 1's A, which leaves after rank 0's B.
  d.Add(0, Prefix(0), "A\n", kT0, &out);
  d.FlushAll(&out);
  CHECK(out == "[default0]:B\n[ranks 0-1]: A\n[default1]:B\n");
}

TEST_CASE("Ranks in step collapse line by line") {
  LineDedup d;
  std::string out;
  for (int r = 0; r < 4; ++r) {
    for (const char* line : {"epoch 1\n", "epoch 2\n", "epoch 3\n"}) d.Add(r, Prefix(r), line, kT0, &out);
  }
  d.FlushAll(&out);
  CHECK(out == "[ranks 0-3]: epoch 1\n[ranks 0-3]: epoch 2\n[ranks 0-3]: epoch 3\n");
}

TEST_CASE("Over the line cap the oldest held line goes out") {
  LineDedup::Limits limits;
  limits.max_lines = 2;
  LineDedup d(limits);
  std::string out;
  d.Add(0, Prefix(0), "a\n", kT0, &out);
  d.Add(0, Prefix(0), "b\n", kT0, &out);
  CHECK(out.empty());
  d.Add(0, Prefix(0), "c\n", kT0, &out);
  CHECK(out == "[default0]:a\n");
  d.Add(1, Prefix(1), "b\n", kT0, &out);  // still held: joins
  d.FlushAll(&out);
  CHECK(out == "[default0]:a\n[ranks 0-1]: b\n[default0]:c\n");
}

TEST_CASE("Over the byte cap the oldest held lines go out; a huge line is not held") {
  LineDedup::Limits limits;
  limits.max_bytes = 20;
  LineDedup d(limits);
  std::string out;
  d.Add(0, "[r0]:", "12345\n", kT0, &out);  // 11 bytes
  d.Add(0, "[r0]:", "67890\n", kT0, &out);  // 22 > 20: the first goes
  CHECK(out == "[r0]:12345\n");
  out.clear();
  const std::string huge(100, 'h');
  d.Add(1, "[r1]:", huge + "\n", kT0, &out);
  CHECK(out == "[r0]:67890\n[r1]:" + huge + "\n");
  CHECK(d.empty());
}

}  // namespace
}  // namespace ctrun::launcher
