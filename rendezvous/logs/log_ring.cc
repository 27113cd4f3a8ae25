#include "rendezvous/logs/log_ring.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

namespace ctrun::rdzv {
namespace {

// Counts the lines of `text` (each ending in '\n') and cuts those over
// kMaxLogLineBytes, rewriting the text only when one is.
size_t CountAndCut(std::string& text) {
  size_t lines = 0;
  bool long_line = false;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (nl == nullptr) nl = end;  // not reached: the caller ends text with '\n'
    long_line |= static_cast<size_t>(nl - p) > kMaxLogLineBytes;
    ++lines;
    p = nl + 1;
  }
  if (long_line) {
    std::string cut;
    cut.reserve(text.size());
    ForEachLine(text, [&](std::string_view line) {
      cut.append(line.substr(0, kMaxLogLineBytes));
      cut.push_back('\n');
    });
    text = std::move(cut);
  }
  return lines;
}

}  // namespace

size_t LogRing::Append(LogRingChunk chunk) { return Append(std::move(chunk), nullptr, 0); }

size_t LogRing::Append(LogRingChunk chunk, std::vector<std::string>* spare, size_t max_spare) {
  if (chunk.text.empty()) return 0;
  if (chunk.text.back() != '\n') chunk.text.push_back('\n');
  const size_t n = CountAndCut(chunk.text);
  chunk.first_seq = next_seq_;
  chunk.lines = n;
  next_seq_ += n;
  bytes_ += ChargedBytes(chunk);
  lines_ += n;
  chunks_.push_back(std::move(chunk));
  DropOldest(limits_.max_bytes, limits_.max_lines, spare, max_spare);
  return n;
}

void LogRing::ShrinkTo(size_t max_bytes, std::vector<std::string>* spare, size_t max_spare) {
  DropOldest(max_bytes, limits_.max_lines, spare, max_spare);
}

void LogRing::DropOldest(size_t max_bytes, size_t max_lines, std::vector<std::string>* spare, size_t max_spare) {
  while (!chunks_.empty() && (bytes_ > max_bytes || lines_ > max_lines)) {
    const LogRingChunk& old = chunks_.front();
    bytes_ -= ChargedBytes(old);
    lines_ -= old.lines;
    dropped_ += old.lines;
    std::string& text = chunks_.front().text;
    if (spare && spare->size() < max_spare && text.capacity() <= kMaxSpareTextBytes) spare->push_back(std::move(text));
    chunks_.pop_front();
  }
}

void LogRing::Append(const LogRecord& line) {
  LogRingChunk c;
  c.rank = line.rank;
  c.local_rank = line.local_rank;
  c.is_stderr = line.is_stderr;
  c.unix_s = line.unix_s;
  c.node = std::make_shared<const std::string>(line.node);
  c.text.reserve(line.text.size() + 1);
  c.text.append(line.text);
  c.text.push_back('\n');
  Append(std::move(c));
}

LogCursor LogRing::ReadSlices(uint64_t from, const LogFilter& filter, size_t max_bytes,
                              const std::function<void(const LogSlice&)>& f) const {
  static const std::string kNoNode;
  LogCursor out;
  from = std::max<uint64_t>(from, 1);
  out.next = from;
  // Seqs are increasing: the first chunk that ends after `from`.
  auto it = std::upper_bound(chunks_.begin(), chunks_.end(), from, [](uint64_t seq, const LogRingChunk& c) {
    return seq < c.first_seq + c.lines;
  });
  size_t bytes = 0;
  bool full = false;
  for (; it != chunks_.end() && !full; ++it) {
    const LogRingChunk& c = *it;
    if (c.first_seq > out.next) {  // a gap: dropped here or by the node
      out.dropped += c.first_seq - out.next;
      out.next = c.first_seq;
    }
    const std::string& node = c.node ? *c.node : kNoNode;
    if (!filter.Matches(c.rank, node, c.unix_s)) {
      out.next = c.first_seq + c.lines;
      continue;
    }
    const char* const text = c.text.data();
    const char* const end = text + c.text.size();
    // Skip the lines of the chunk before the cursor.
    const char* p = text;
    for (uint64_t skip = out.next - c.first_seq; skip > 0; --skip) {
      p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p))) + 1;
    }
    const size_t per_line = node.size() + 48;  // ChargedBytes(LogRecord) without the text
    size_t lines = static_cast<size_t>(c.first_seq + c.lines - out.next);
    const size_t rest = static_cast<size_t>(end - p);
    const char* stop = end;
    if (bytes + rest - lines + lines * per_line < max_bytes) {
      bytes += rest - lines + lines * per_line;  // the rest of the chunk, unsplit
    } else {
      // The budget ends inside: the lines up to the one that reaches it.
      lines = 0;
      for (const char* q = p; q < end && bytes < max_bytes;) {
        const char* nl = static_cast<const char*>(std::memchr(q, '\n', static_cast<size_t>(end - q)));
        bytes += static_cast<size_t>(nl - q) + per_line;
        ++lines;
        q = nl + 1;
        stop = q;
      }
      full = true;
    }
    f(LogSlice{&c, out.next, std::string_view(p, static_cast<size_t>(stop - p)), lines});
    out.next += lines;
  }
  if (!full && next_seq_ > out.next) {  // numbers after the last kept line
    out.dropped += next_seq_ - out.next;
    out.next = next_seq_;
  }
  return out;
}

LogRead LogRing::Read(uint64_t from, const LogFilter& filter, size_t max_bytes) const {
  LogRead out;
  const LogCursor cursor = ReadSlices(from, filter, max_bytes, [&](const LogSlice& s) {
    const LogRingChunk& c = *s.chunk;
    uint64_t seq = s.first_seq;
    for (size_t pos = 0; pos < s.text.size();) {
      const size_t nl = s.text.find('\n', pos);
      LogRecord r;
      r.rank = c.rank;
      r.local_rank = c.local_rank;
      r.is_stderr = c.is_stderr;
      r.unix_s = c.unix_s;
      r.text.assign(s.text.substr(pos, nl - pos));
      r.seq = seq++;
      if (c.node) r.node = *c.node;
      out.lines.push_back(std::move(r));
      pos = nl + 1;
    }
  });
  out.dropped = cursor.dropped;
  out.next = cursor.next;
  return out;
}

}  // namespace ctrun::rdzv
