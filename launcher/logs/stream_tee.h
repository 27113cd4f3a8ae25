// Tee of a worker's stdout or stderr: every byte to the rank's log file, and
// whole lines, each behind a prefix such as "[default0]:", to ctrun's console
// (or, with --dedup-logs, to a ConsoleDedup that writes them there).
// With a FilteredLog (--duplicate-*-filters) the matching lines, prefixed,
// also go there; with a LogShipper (--share-logs) every line, unprefixed,
// goes there too (a line longer than rdzv::kMaxLogLineBytes is cut there); a stream piped only for that filter passes to the console
// unprefixed, as if the worker wrote to it directly (TeeOptions).
//
// LinePrefixer is the pure part (bytes in, prefixed whole lines out);
// StreamTee drives it from a pipe on the io_context. A line is written to the
// console with one write, so lines from different ranks never mix within a
// line. A last line without '\n' is completed at end-of-file.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "rendezvous/logs/log_record.h"

namespace ctrun::launcher {

using rdzv::LogChunk;

// Expands ${role_name}, ${rank} and ${local_rank} in a
// TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; an empty template gives torchrun's
// default "[<role><local_rank>]:".
std::string ExpandLinePrefix(const std::string& tmpl, const std::string& role, int rank,
                             int local_rank);

class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends to *out each complete line of `data` (prefix + line + '\n') and
  // keeps an incomplete tail for the next call.
  void Feed(std::string_view data, std::string* out);
  // Appends the kept tail, if any, as a line of its own.
  void Finish(std::string* out);

 private:
  std::string prefix_;
  std::string partial_;
};

class ConsoleDedup;
class FilteredLog;
class LogShipper;

struct TeeOptions {
  // false: the console gets the bytes as they come, with no prefix (a stream
  // that is not tee'd, piped only so that `filtered` sees its lines).
  bool prefix_console = true;
  FilteredLog* filtered = nullptr;  // borrowed; must outlive the StreamTee
  // --dedup-logs: the console's whole lines go here (as local rank
  // `local_rank`'s, prefixed or not as above) instead of to the console fd.
  ConsoleDedup* dedup = nullptr;  // borrowed; must outlive the StreamTee
  int local_rank = 0;
  // --share-logs: every line also goes here, as global rank `rank`'s.
  LogShipper* shipper = nullptr;  // borrowed; must outlive the StreamTee
  int rank = 0;
  bool is_stderr = false;
  // Every byte read also goes here, as read (the agent keeps a worker's last
  // stderr lines for its failure report); empty: nowhere.
  std::function<void(std::string_view)> on_bytes{};
};

// After a read that emptied a worker's pipe the tee leaves the pipe alone
// (not even watched by epoll) for a pause before it reads again, so that a
// worker writing line by line is read in a few large reads rather than one
// wake-up per write; a line that comes after a quiet spell is still read at
// once. The pause is at most kTeeReadPause, and short enough that the worker,
// writing as fast as in the last cycle, fills about half the pipe: a fast
// writer is never held up by a full pipe.
inline constexpr std::chrono::microseconds kTeeReadPause{5000};
// Below this the tee reads again at once (a timer would cost more).
inline constexpr std::chrono::microseconds kTeeMinPause{100};

// The pause after a cycle that read `bytes` in `elapsed` (from the read that
// last emptied the pipe to the one that emptied it now) from a pipe of
// `pipe_bytes`: the time to write pipe_bytes / 2 at that rate, at most
// kTeeReadPause; zero when it would be under kTeeMinPause.
std::chrono::microseconds TeeReadPause(std::chrono::microseconds elapsed, size_t bytes, size_t pipe_bytes);

class StreamTee {
 public:
  // Takes ownership of `pipe_fd` and `file_fd` (-1: no file) and closes them at
  // end-of-file. `console_fd` (-1: none) is borrowed. `on_eof` runs once, on
  // the io_context, after the last byte is written.
  StreamTee(boost::asio::io_context& io, int pipe_fd, int file_fd, int console_fd,
            std::string prefix, std::function<void()> on_eof, TeeOptions options = {});
  ~StreamTee();
  StreamTee(const StreamTee&) = delete;
  StreamTee& operator=(const StreamTee&) = delete;

  bool done() const { return done_; }

  // For when the worker is gone: takes what the pipe holds now, completes the
  // last line and finishes (on_eof runs), without waiting for an end-of-file
  // that a descendant still holding the pipe would put off for ever. While a
  // read is in flight (its bytes may be read and not yet handled) this
  // happens in that read's handler, after its bytes: on_eof then runs later,
  // on the io_context.
  void DrainAndFinish();

 private:
  void Read();
  void OnRead(const boost::system::error_code& ec, size_t n);
  void ReadAfterPause(std::chrono::microseconds pause);
  void Drain();  // DrainAndFinish's work, with no read in flight
  void Consume(size_t n);  // the first n bytes of buf_ to the file, the console, the filter
  bool WantsLines() const;  // the console takes prefixed lines, or there is a filter
  void WriteLines();        // out_'s prefixed lines to the console and the filter
  void DedupLines();        // out_'s lines to options_.dedup
  void ShipLines(std::string_view data);  // data's whole lines to options_.shipper
  void ShipTail();                        // the last line without '\n'
  LogChunk NewChunk() const;              // an empty chunk of this stream, read now
  void Finish();

  boost::asio::posix::stream_descriptor pipe_;
  boost::asio::steady_timer pace_;  // the pause after a read that emptied the pipe
  // The pipe while paused: released from pipe_ (and so from epoll, which
  // would otherwise wake the loop at every write the worker makes).
  int paused_fd_ = -1;
  size_t pipe_bytes_;        // the pipe's capacity (F_GETPIPE_SZ)
  size_t cycle_bytes_ = 0;   // read since the pipe was last emptied
  std::chrono::steady_clock::time_point cycle_start_{};  // when it was (zero: never yet)
  bool reading_ = false;          // an async read is in flight
  bool drain_requested_ = false;  // DrainAndFinish came while it was
  int file_fd_;
  int console_fd_;
  TeeOptions options_;
  size_t prefix_size_;
  LinePrefixer prefixer_;
  std::function<void()> on_eof_;
  std::array<char, 65536> buf_;
  std::string out_;
  std::string ship_partial_;  // --share-logs: the line not yet complete
  bool done_ = false;
};

// Writes all of `data` to `fd`, retrying on EINTR and short writes. Errors
// (EPIPE when the console reader went away) drop the data silently.
void WriteAll(int fd, std::string_view data);

}  // namespace ctrun::launcher
