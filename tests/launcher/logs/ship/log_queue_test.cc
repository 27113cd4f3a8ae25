// The agent's queue of shared log lines: bounds, drop-oldest, batches.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "launcher/logs/ship/log_queue.h"

namespace ctrun::launcher {
namespace {

// A chunk of `n` lines "<tag>0".."<tag>(n-1)" of rank `rank`'s stdout.
LogChunk Chunk(const std::string& tag, size_t n = 1, int rank = 0) {
  LogChunk c;
  c.rank = rank;
  for (size_t i = 0; i < n; ++i) c.text += tag + std::to_string(i) + "\n";
  c.lines = n;
  return c;
}

std::vector<std::string> Lines(const std::vector<LogChunk>& batch) {
  std::vector<std::string> out;
  for (const LogChunk& c : batch) rdzv::ForEachLine(c.text, [&](std::string_view l) { out.emplace_back(l); });
  return out;
}

TEST_CASE("log queue: takes batches of whole chunks in order, up to the byte budget") {
  LogQueue q(LogQueueLimits{65536, 8 << 20, 0});
  for (int i = 0; i < 10; ++i) q.Push(Chunk("c" + std::to_string(i) + ".", 2));
  CHECK(q.lines() == 20);
  uint64_t dropped = 99;
  const size_t each = Chunk("c0.", 2).text.size();
  auto batch = q.TakeBatch(3 * each, &dropped);
  REQUIRE(batch.size() == 3);
  CHECK(Lines(batch) == std::vector<std::string>{"c0.0", "c0.1", "c1.0", "c1.1", "c2.0", "c2.1"});
  CHECK(dropped == 0);
  CHECK(q.lines() == 14);
  batch = q.TakeBatch(1 << 20, &dropped);
  CHECK(batch.size() == 7);
  CHECK(q.empty());
  CHECK(q.bytes() == 0);
  CHECK(q.lines() == 0);
}

TEST_CASE("log queue: a batch has at least one chunk, however long; empty chunks are ignored") {
  LogQueue q;
  q.Push(LogChunk{});
  CHECK(q.empty());
  q.Push(Chunk(std::string(1000, 'x')));
  uint64_t dropped = 0;
  CHECK(q.TakeBatch(1, &dropped).size() == 1);
}

TEST_CASE("log queue: full, it drops the oldest chunks and counts their lines once") {
  LogQueue q(LogQueueLimits{5, 1 << 20, 0});
  for (int i = 0; i < 5; ++i) q.Push(Chunk("c" + std::to_string(i) + ".", 2));
  CHECK(q.lines() == 4);
  CHECK(q.pending_dropped() == 6);
  uint64_t dropped = 0;
  auto batch = q.TakeBatch(1 << 20, &dropped);
  CHECK(dropped == 6);
  CHECK(Lines(batch).front() == "c3.0");
  q.TakeBatch(1 << 20, &dropped);
  CHECK(dropped == 0);
  CHECK(q.total_dropped() == 6);
}

TEST_CASE("log queue: the byte bound holds but keeps the newest chunk; lost batches count as drops") {
  const size_t each = Chunk(std::string(100, 'x')).text.size();
  LogQueue q(LogQueueLimits{1000, 4 * each, 0});
  for (int i = 0; i < 10; ++i) q.Push(Chunk(std::string(100, 'x')));
  CHECK(q.lines() == 4);
  CHECK(q.bytes() <= 4 * each);
  LogQueue tiny(LogQueueLimits{1, 1});
  tiny.Push(Chunk("big", 3));
  CHECK(tiny.lines() == 3);
  uint64_t dropped = 0;
  tiny.TakeBatch(1 << 20, &dropped);
  tiny.NoteLost(3);
  CHECK_FALSE(tiny.empty());
  tiny.TakeBatch(1 << 20, &dropped);
  CHECK(dropped == 3);
}

TEST_CASE("log queue: a stream's small chunks merge, in order, within merge_bytes and the bounds") {
  LogQueue q(LogQueueLimits{8, 1 << 20, 12});
  q.Push(Chunk("a", 1, 0));  // "a0\n": 3 bytes
  q.Push(Chunk("b", 1, 1));
  q.Push(Chunk("c", 2, 0));  // merges into a's chunk, past b's
  LogChunk err = Chunk("e", 1, 0);
  err.is_stderr = true;
  q.Push(err);  // another stream: its own chunk
  q.Push(Chunk("d", 2, 0));  // a's chunk would be 15 bytes: a new one
  CHECK(q.lines() == 7);
  CHECK(q.bytes() == 21);
  uint64_t dropped = 0;
  auto batch = q.TakeBatch(1 << 20, &dropped);
  REQUIRE(batch.size() == 4);
  CHECK(batch[0].lines == 3);
  CHECK(batch[0].text == "a0\nc0\nc1\n");
  CHECK(Lines(batch) == std::vector<std::string>{"a0", "c0", "c1", "b0", "e0", "d0", "d1"});
  // A merge never takes the queue past a bound: then a new chunk, and the oldest go.
  LogQueue tight(LogQueueLimits{3, 1 << 20, 1 << 10});
  tight.Push(Chunk("x", 2));
  tight.Push(Chunk("y", 2));
  CHECK(tight.lines() == 2);
  CHECK(tight.pending_dropped() == 2);
  CHECK(Lines(tight.TakeBatch(1 << 20, &dropped)) == std::vector<std::string>{"y0", "y1"});
}

}  // namespace
}  // namespace ctrun::launcher
