// The server's shared-log rings: numbering, bounds, gaps counted as drops,
// filters, and the runs' eviction. Pure: no I/O.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "rendezvous/logs/log_ring.h"
#include "rendezvous/logs/log_runs.h"

namespace ctrun::rdzv {
namespace {

LogRecord Line(int rank, const std::string& text, const std::string& node = "n0", double t = 100) {
  LogRecord r;
  r.rank = rank;
  r.text = text;
  r.node = node;
  r.unix_s = t;
  return r;
}

constexpr size_t kAll = 1 << 30;

TEST_CASE("log ring: lines are numbered from 1 and read back in order") {
  LogRing ring;
  ring.Append(Line(0, "a"));
  ring.Append(Line(1, "b"));
  ring.Append(Line(0, "c"));
  LogRead read = ring.Read(1, {}, kAll);
  REQUIRE(read.lines.size() == 3);
  CHECK(read.lines[0].seq == 1);
  CHECK(read.lines[2].text == "c");
  CHECK(read.dropped == 0);
  CHECK(read.next == 4);
  // From the cursor: only what is new.
  ring.Append(Line(1, "d"));
  read = ring.Read(read.next, {}, kAll);
  REQUIRE(read.lines.size() == 1);
  CHECK(read.lines[0].text == "d");
  CHECK(ring.Read(read.next, {}, kAll).lines.empty());
}

TEST_CASE("log ring: the line bound drops the oldest, and a reader behind counts them") {
  LogRing ring(LogRingLimits{1 << 20, 3});
  for (int i = 0; i < 5; ++i) ring.Append(Line(0, std::to_string(i)));
  CHECK(ring.lines() == 3);
  CHECK(ring.dropped() == 2);
  LogRead read = ring.Read(1, {}, kAll);
  CHECK(read.dropped == 2);
  REQUIRE(read.lines.size() == 3);
  CHECK(read.lines.front().text == "2");
  CHECK(read.lines.front().seq == 3);
}

TEST_CASE("log ring: the byte bound holds, a long line is cut") {
  LogRingChunk one;
  one.text = std::string(100, 'x') + "\n";
  LogRing ring(LogRingLimits{3 * ChargedBytes(one), 1000});
  for (int i = 0; i < 10; ++i) ring.Append(Line(0, std::string(100, 'x')));
  CHECK(ring.lines() == 3);
  CHECK(ring.bytes() <= 3 * ChargedBytes(one));
  LogRing big;
  big.Append(Line(0, std::string(kMaxLogLineBytes + 10, 'y')));
  CHECK(big.Read(1, {}, kAll).lines[0].text.size() == kMaxLogLineBytes);
}

LogRingChunk Chunk(int rank, const std::string& text, const std::string& node = "n0", double t = 100) {
  LogRingChunk c;
  c.rank = rank;
  c.text = text;
  c.node = std::make_shared<const std::string>(node);
  c.unix_s = t;
  return c;
}

std::vector<std::string> Texts(const LogRead& read) {
  std::vector<std::string> out;
  for (const LogRecord& r : read.lines) out.push_back(r.text);
  return out;
}

TEST_CASE("log ring: a chunk of n lines takes n numbers; a cursor inside it slices it") {
  LogRing ring;
  CHECK(ring.Append(Chunk(0, "a\nb\nc\n")) == 3);
  CHECK(ring.Append(Chunk(1, "d\n\nf\n", "n1")) == 3);
  CHECK(ring.lines() == 6);
  CHECK(ring.chunks() == 2);
  CHECK(ring.next_seq() == 7);
  LogRead read = ring.Read(1, {}, kAll);
  CHECK(Texts(read) == std::vector<std::string>{"a", "b", "c", "d", "", "f"});
  CHECK(read.lines[4].seq == 5);
  CHECK(read.lines[4].node == "n1");
  CHECK(read.lines[4].rank == 1);
  read = ring.Read(2, {}, kAll);
  CHECK(Texts(read) == std::vector<std::string>{"b", "c", "d", "", "f"});
  CHECK(read.lines[0].seq == 2);
  read = ring.Read(6, {}, kAll);
  CHECK(Texts(read) == std::vector<std::string>{"f"});
  CHECK(read.next == 7);
  // The budget stops a read inside a chunk; the next read goes on from there.
  read = ring.Read(1, {}, 1);
  CHECK(Texts(read) == std::vector<std::string>{"a"});
  CHECK(read.next == 2);
  read = ring.Read(read.next, {}, 1);
  CHECK(Texts(read) == std::vector<std::string>{"b"});
  CHECK(read.dropped == 0);
}

TEST_CASE("log ring: slices are whole chunks, cut at the cursor and where the budget ends, as Read's lines") {
  LogRing ring;
  ring.Append(Chunk(0, "a\nbb\nc\n"));
  ring.Append(Chunk(1, "d\n\nf\n", "n1"));
  struct Seen {
    int rank;
    uint64_t first_seq;
    std::string text;
    size_t lines;
  };
  const auto slices = [&](uint64_t from, size_t budget, LogCursor* cursor) {
    std::vector<Seen> out;
    *cursor = ring.ReadSlices(from, {}, budget, [&](const LogSlice& s) {
      out.push_back({s.chunk->rank, s.first_seq, std::string(s.text), s.lines});
    });
    return out;
  };
  LogCursor cursor;
  std::vector<Seen> all = slices(1, kAll, &cursor);  // one slice a chunk
  REQUIRE(all.size() == 2);
  CHECK((all[0].text == "a\nbb\nc\n" && all[0].first_seq == 1 && all[0].lines == 3 && all[0].rank == 0));
  CHECK((all[1].text == "d\n\nf\n" && all[1].first_seq == 4 && all[1].lines == 3 && all[1].rank == 1));
  CHECK(cursor.next == 7);
  std::vector<Seen> tail = slices(3, kAll, &cursor);  // from inside the first chunk
  REQUIRE(tail.size() == 2);
  CHECK((tail[0].text == "c\n" && tail[0].first_seq == 3 && tail[0].lines == 1));
  // A budget that ends inside a chunk ends the slice with the line that
  // reaches it, exactly where Read's lines end.
  for (size_t budget : {size_t{1}, size_t{50}, size_t{100}, size_t{160}, size_t{200}, size_t{260}}) {
    LogRead read = ring.Read(2, {}, budget);
    std::vector<Seen> cut = slices(2, budget, &cursor);
    std::string joined;
    for (const Seen& s : cut) joined += s.text;
    std::string lines;
    for (const LogRecord& r : read.lines) lines += r.text + "\n";
    CHECK(joined == lines);
    CHECK(cursor.next == read.next);
    CHECK(cursor.dropped == read.dropped);
  }
  CHECK(slices(2, 1, &cursor).front().text == "bb\n");
  CHECK(cursor.next == 3);
}

TEST_CASE("log ring: bounds drop whole oldest chunks, counted line by line") {
  LogRing ring(LogRingLimits{1 << 20, 5});
  ring.Append(Chunk(0, "a\nb\nc\n"));
  ring.Append(Chunk(0, "d\ne\n"));
  CHECK(ring.lines() == 5);
  ring.Append(Chunk(0, "f\n"));  // 6 lines: the first chunk goes, all 3 lines
  CHECK(ring.lines() == 3);
  CHECK(ring.chunks() == 2);
  CHECK(ring.dropped() == 3);
  LogRead read = ring.Read(2, {}, kAll);  // a cursor inside the dropped chunk
  CHECK(read.dropped == 2);
  CHECK(Texts(read) == std::vector<std::string>{"d", "e", "f"});
  CHECK(read.lines[0].seq == 4);
  // A chunk over a bound alone is dropped too: the bound holds.
  ring.Append(Chunk(0, "1\n2\n3\n4\n5\n6\n"));
  CHECK(ring.lines() == 0);
  CHECK(ring.bytes() == 0);
  read = ring.Read(read.next, {}, kAll);
  CHECK(read.dropped == 6);
  CHECK(read.lines.empty());
}

TEST_CASE("log ring: a chunk's long lines are cut, a missing final newline added, an empty chunk ignored") {
  LogRing ring;
  CHECK(ring.Append(Chunk(0, "")) == 0);
  CHECK(ring.next_seq() == 1);
  CHECK(ring.Append(Chunk(0, "x\n" + std::string(kMaxLogLineBytes + 1, 'y') + "\nz")) == 3);
  LogRead read = ring.Read(1, {}, kAll);
  REQUIRE(read.lines.size() == 3);
  CHECK(read.lines[0].text == "x");
  CHECK(read.lines[1].text == std::string(kMaxLogLineBytes, 'y'));
  CHECK(read.lines[2].text == "z");
}

TEST_CASE("log ring: filters skip whole chunks without counting them as drops") {
  LogRing ring;
  ring.Append(Chunk(0, "a\nb\n", "n0", 10));
  ring.Append(Chunk(1, "c\nd\n", "n1", 20));
  ring.Append(Chunk(0, "e\n", "n0", 30));
  LogFilter rank1;
  rank1.rank = 1;
  LogRead read = ring.Read(1, rank1, kAll);
  CHECK(Texts(read) == std::vector<std::string>{"c", "d"});
  CHECK(read.dropped == 0);
  CHECK(read.next == 6);
  LogFilter node0;
  node0.node = "n0";
  CHECK(Texts(ring.Read(2, node0, kAll)) == std::vector<std::string>{"b", "e"});
  // A label with its agent's pid: matched whole, or by its address alone.
  LogFilter by_addr;
  by_addr.node = "vm";
  CHECK(by_addr.NodeMatches("vm#7260"));
  CHECK(by_addr.NodeMatches("vm"));
  CHECK_FALSE(by_addr.NodeMatches("vm2#7260"));
  CHECK_FALSE(by_addr.NodeMatches("v"));
  by_addr.node = "vm#7260";
  CHECK(by_addr.NodeMatches("vm#7260"));
  CHECK_FALSE(by_addr.NodeMatches("vm#7261"));
  CHECK_FALSE(by_addr.NodeMatches("vm"));
  LogFilter since;
  since.since_unix_s = 20;
  CHECK(Texts(ring.Read(1, since, kAll)) == std::vector<std::string>{"c", "d", "e"});
}

TEST_CASE("log ring: lines a node dropped are a gap readers count") {
  LogRing ring;
  ring.Append(Line(0, "a"));
  ring.NoteDropped(5);
  ring.Append(Line(0, "b"));
  LogRead read = ring.Read(1, {}, kAll);
  REQUIRE(read.lines.size() == 2);
  CHECK(read.dropped == 5);
  CHECK(read.lines[1].seq == 7);
  // Drops after the last line are counted too, once.
  ring.NoteDropped(2);
  read = ring.Read(read.next, {}, kAll);
  CHECK(read.lines.empty());
  CHECK(read.dropped == 2);
  CHECK(ring.Read(read.next, {}, kAll).dropped == 0);
}

TEST_CASE("log ring: filters by rank, node and time; filtered lines are not drops") {
  LogRing ring;
  ring.Append(Line(0, "a", "n0", 10));
  ring.Append(Line(1, "b", "n0", 20));
  ring.Append(Line(2, "c", "n1", 30));
  LogFilter rank1;
  rank1.rank = 1;
  LogRead read = ring.Read(1, rank1, kAll);
  REQUIRE(read.lines.size() == 1);
  CHECK(read.lines[0].text == "b");
  CHECK(read.dropped == 0);
  CHECK(read.next == 4);
  LogFilter node1;
  node1.node = "n1";
  CHECK(ring.Read(1, node1, kAll).lines.at(0).text == "c");
  LogFilter since;
  since.since_unix_s = 20;
  CHECK(ring.Read(1, since, kAll).lines.size() == 2);
}

TEST_CASE("log ring: a read stops at its byte budget, at least one line") {
  LogRing ring;
  for (int i = 0; i < 10; ++i) ring.Append(Line(0, std::string(100, 'x')));
  LogRead read = ring.Read(1, {}, 1);
  CHECK(read.lines.size() == 1);
  CHECK(read.next == 2);
  read = ring.Read(read.next, {}, 3 * ChargedBytes(read.lines[0]));
  CHECK(read.lines.size() == 3);
}

TEST_CASE("log ring: ShrinkTo drops whole oldest chunks, counted as drops a reader sees") {
  LogRing ring;
  ring.Append(Chunk(0, "a\nb\n"));
  ring.Append(Chunk(1, "c\n"));
  ring.Append(Chunk(2, "d\ne\nf\n"));
  const size_t last = ChargedBytes(Chunk(2, "d\ne\nf\n"));
  ring.ShrinkTo(ring.bytes() - 1);  // one byte too many: the oldest chunk goes, both its lines
  CHECK(ring.chunks() == 2);
  CHECK(ring.dropped() == 2);
  ring.ShrinkTo(last);
  CHECK(ring.chunks() == 1);
  CHECK(ring.bytes() == last);
  CHECK(ring.dropped() == 3);
  std::vector<std::string> spare;
  ring.ShrinkTo(0, &spare, 4);
  CHECK(ring.chunks() == 0);
  REQUIRE(spare.size() == 1);  // the dropped text, for reuse
  CHECK(spare[0] == "d\ne\nf\n");
  LogRead read = ring.Read(1, {}, kAll);
  CHECK(read.dropped == 6);
  CHECK(read.lines.empty());
  CHECK(read.next == 7);
  ring.Append(Chunk(0, "g\n"));
  CHECK(ring.Read(read.next, {}, kAll).lines.at(0).seq == 7);
}

TEST_CASE("log runs: the rings together stay within max_total_bytes; the largest gives way") {
  const size_t one = ChargedBytes(Chunk(0, "0123456789\n"));
  // Each ring may hold 10 such chunks, all of them together 12.
  LogRuns runs(LogRunsLimits{LogRingLimits{10 * one, 1000}, 8, 12 * one});
  LogRing& a = runs.Open("a");
  for (int i = 0; i < 10; ++i) CHECK(runs.Append(a, Chunk(0, "0123456789\n")) == 1);
  CHECK(a.bytes() == 10 * one);  // one busy run may use its whole ring
  CHECK(runs.total_bytes() == 10 * one);
  LogRing& b = runs.Open("b");
  for (int i = 0; i < 4; ++i) runs.Append(b, Chunk(1, "0123456789\n"));
  // 14 chunks' worth is over the total: the largest ring (a) dropped 2.
  CHECK(runs.total_bytes() == 12 * one);
  CHECK(a.bytes() == 8 * one);
  CHECK(a.dropped() == 2);
  CHECK(b.bytes() == 4 * one);
  CHECK(b.dropped() == 0);
  CHECK(a.Read(1, {}, kAll).dropped == 2);  // a's reader sees the drop as a gap
  for (int i = 0; i < 4; ++i) runs.Append(b, Chunk(1, "0123456789\n"));
  CHECK(runs.total_bytes() == 12 * one);  // a (the larger) kept giving way
  CHECK(a.bytes() == 6 * one);
  CHECK(b.bytes() == 6 * one);
  runs.Append(b, Chunk(1, "0123456789\n"));  // b is now the larger: it drops its own oldest
  CHECK(b.bytes() == 6 * one);
  CHECK(a.bytes() == 6 * one);
  REQUIRE(runs.Forget("a"));
  CHECK(runs.total_bytes() == 6 * one);
}

TEST_CASE("log runs: at most max_runs rings; the least recently used run is evicted") {
  LogRuns runs(LogRunsLimits{{}, 2});
  runs.Append(runs.Open("a"), Chunk(0, "x\n"));
  runs.Append(runs.Open("b"), Chunk(0, "y\n"));
  CHECK(runs.total_bytes() == 2 * ChargedBytes(Chunk(0, "x\n")));
  const uint64_t epoch_a = runs.Epoch("a");
  runs.Touch("a");  // b is now the oldest
  std::string evicted;
  runs.Open("c", &evicted);
  CHECK(evicted == "b");
  CHECK(runs.total_bytes() == ChargedBytes(Chunk(0, "x\n")));  // b's bytes went with it
  CHECK(runs.size() == 2);
  CHECK(runs.Find("b") == nullptr);
  CHECK(runs.Epoch("a") == epoch_a);
  // A ring made again has a new epoch.
  REQUIRE(runs.Forget("a"));
  runs.Open("a");
  CHECK(runs.Epoch("a") != epoch_a);
  CHECK(runs.Find("a")->next_seq() == 1);
}

}  // namespace
}  // namespace ctrun::rdzv
