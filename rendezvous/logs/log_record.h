// LogRecord: one line of a worker's output, as the rendezvous server serves
// it to readers (proto/rendezvous.proto's LogLine, without the proto; the
// ring keeps whole chunks, rendezvous/logs/log_ring.h).
// LogChunk: some whole lines of one worker stream, as an agent queues and
// ships them (--share-logs): one allocation for all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ctrun::rdzv {

// The longest line kept; longer ones are cut to this many bytes.
inline constexpr size_t kMaxLogLineBytes = 16 * 1024;

struct LogRecord {
  int32_t rank = 0;        // global rank of the worker
  int32_t local_rank = 0;
  bool is_stderr = false;
  double unix_s = 0;       // when the agent read it
  std::string text;        // one line, no '\n', <= kMaxLogLineBytes
  // Set by the server: the line's number in its run's log (from 1; a gap is
  // lines dropped) and the label of the node that sent it.
  uint64_t seq = 0;
  std::string node;
};

// Some whole lines of one worker stream, read at one time.
struct LogChunk {
  int32_t rank = 0;        // global rank of the worker
  int32_t local_rank = 0;
  bool is_stderr = false;
  double unix_s = 0;       // when the agent read them
  std::string text;        // the lines, each ending in '\n'
  size_t lines = 0;        // how many
};

// Some consecutive lines of one worker stream as a server serves them to a
// reader that asks for chunks (ReadLogsRequest.chunks): the fields of
// LogRecord once for all of them.
struct LogReadChunk {
  int32_t rank = 0;        // global rank of the worker
  int32_t local_rank = 0;
  bool is_stderr = false;
  double unix_s = 0;       // when the agent read them
  uint64_t first_seq = 0;  // the first line's number; the next lines take the next ones
  std::string node;        // the label of the node that sent them
  std::string text;        // whole lines, each ending in '\n'
};

// Splits a chunk's text into its lines (without '\n'), calling `f(line)`.
template <class F>
void ForEachLine(const std::string& text, F&& f) {
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    f(std::string_view(text).substr(start, nl - start));
    start = nl + 1;
  }
}

// The bytes a line read from a ring is charged for (a reader's budget): its
// text and node label plus a fixed overhead for the rest.
inline size_t ChargedBytes(const LogRecord& r) { return r.text.size() + r.node.size() + 48; }

}  // namespace ctrun::rdzv
