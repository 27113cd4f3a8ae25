#include "launcher/logs/stream_tee.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

#include "launcher/logs/console_dedup.h"
#include "launcher/logs/filtered_log.h"
#include "launcher/logs/ship/log_shipper.h"

namespace ctrun::launcher {

namespace {

void ReplaceAll(std::string& s, std::string_view from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

}  // namespace

std::string ExpandLinePrefix(const std::string& tmpl, const std::string& role, int rank,
                             int local_rank) {
  if (tmpl.empty()) return "[" + role + std::to_string(local_rank) + "]:";
  std::string s = tmpl;
  ReplaceAll(s, "${role_name}", role);
  ReplaceAll(s, "${local_rank}", std::to_string(local_rank));
  ReplaceAll(s, "${rank}", std::to_string(rank));
  return s;
}

void LinePrefixer::Feed(std::string_view data, std::string* out) {
  size_t start = 0;
  for (size_t nl = data.find('\n'); nl != std::string_view::npos; nl = data.find('\n', start)) {
    out->append(prefix_);
    out->append(partial_);
    partial_.clear();
    out->append(data.substr(start, nl + 1 - start));
    start = nl + 1;
  }
  partial_.append(data.substr(start));
}

void LinePrefixer::Finish(std::string* out) {
  if (partial_.empty()) return;
  out->append(prefix_);
  out->append(partial_);
  out->push_back('\n');
  partial_.clear();
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::chrono::microseconds TeeReadPause(std::chrono::microseconds elapsed, size_t bytes, size_t pipe_bytes) {
  if (bytes == 0) return kTeeReadPause;
  const double us = static_cast<double>(elapsed.count()) * static_cast<double>(pipe_bytes / 2) /
                    static_cast<double>(bytes);
  if (us >= static_cast<double>(kTeeReadPause.count())) return kTeeReadPause;
  if (us < static_cast<double>(kTeeMinPause.count())) return std::chrono::microseconds(0);
  return std::chrono::microseconds(static_cast<int64_t>(us));
}

namespace {

size_t PipeCapacity(int fd) {
  const int n = ::fcntl(fd, F_GETPIPE_SZ);
  return n > 0 ? static_cast<size_t>(n) : 65536;  // Linux's default
}

}  // namespace

StreamTee::StreamTee(boost::asio::io_context& io, int pipe_fd, int file_fd, int console_fd,
                     std::string prefix, std::function<void()> on_eof, TeeOptions options)
    : pipe_(io, pipe_fd),
      pace_(io),
      pipe_bytes_(PipeCapacity(pipe_fd)),
      file_fd_(file_fd),
      console_fd_(console_fd),
      options_(options),
      prefix_size_(prefix.size()),
      prefixer_(std::move(prefix)),
      on_eof_(std::move(on_eof)) {
  Read();
}

StreamTee::~StreamTee() {
  if (file_fd_ >= 0) ::close(file_fd_);
  if (paused_fd_ >= 0) ::close(paused_fd_);
}

void StreamTee::Read() {
  reading_ = true;
  pipe_.async_read_some(boost::asio::buffer(buf_),
                        [this](const boost::system::error_code& ec, size_t n) { OnRead(ec, n); });
}

void StreamTee::OnRead(const boost::system::error_code& ec, size_t n) {
  reading_ = false;
  if (done_) return;
  if (n > 0) Consume(n);
  if (drain_requested_) {
    Drain();
    return;
  }
  if (ec) {
    Finish();
    return;
  }
  cycle_bytes_ += n;
  if (n == buf_.size()) {
    Read();  // more may be waiting
    return;
  }
  // The pipe is empty: a cycle ends.
  const auto now = std::chrono::steady_clock::now();
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now - cycle_start_);
  const std::chrono::microseconds pause =
      cycle_start_ == std::chrono::steady_clock::time_point{} ? kTeeReadPause
                                                              : TeeReadPause(elapsed, cycle_bytes_, pipe_bytes_);
  cycle_bytes_ = 0;
  cycle_start_ = now;
  if (pause.count() == 0) {
    Read();
    return;
  }
  ReadAfterPause(pause);
}

void StreamTee::ReadAfterPause(std::chrono::microseconds pause) {
  paused_fd_ = pipe_.release();  // no operation is pending: this is the read's handler
  pace_.expires_after(pause);
  pace_.async_wait([this](const boost::system::error_code&) {
    if (done_) return;  // Finish ran (it cancels the pause)
    boost::system::error_code assigned;
    pipe_.assign(std::exchange(paused_fd_, -1), assigned);
    if (assigned) {
      Finish();
      return;
    }
    Read();
  });
}

void StreamTee::Consume(size_t n) {
  std::string_view data(buf_.data(), n);
  if (file_fd_ >= 0) WriteAll(file_fd_, data);
  if (console_fd_ >= 0 && !options_.prefix_console && options_.dedup == nullptr) WriteAll(console_fd_, data);
  if (options_.shipper != nullptr) ShipLines(data);
  if (options_.on_bytes) options_.on_bytes(data);
  if (!WantsLines()) return;
  out_.clear();
  prefixer_.Feed(data, &out_);
  WriteLines();
}

bool StreamTee::WantsLines() const {
  return (console_fd_ >= 0 && (options_.prefix_console || options_.dedup != nullptr)) ||
         options_.filtered != nullptr;
}

void StreamTee::WriteLines() {
  if (console_fd_ >= 0 && options_.dedup != nullptr) {
    DedupLines();
  } else if (console_fd_ >= 0 && options_.prefix_console) {
    WriteAll(console_fd_, out_);
  }
  if (options_.filtered != nullptr) options_.filtered->WriteMatching(out_, prefix_size_);
}

void StreamTee::DedupLines() {
  std::string_view lines = out_;
  while (!lines.empty()) {
    const size_t nl = lines.find('\n');
    std::string_view line = lines.substr(0, nl == std::string_view::npos ? lines.size() : nl + 1);
    lines.remove_prefix(line.size());
    std::string_view prefix = line.substr(0, std::min(prefix_size_, line.size()));
    line.remove_prefix(prefix.size());
    options_.dedup->Add(options_.local_rank, options_.prefix_console ? prefix : std::string_view(), line);
  }
}

namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

LogChunk StreamTee::NewChunk() const {
  LogChunk chunk;
  chunk.rank = options_.rank;
  chunk.local_rank = options_.local_rank;
  chunk.is_stderr = options_.is_stderr;
  chunk.unix_s = UnixNow();
  return chunk;
}

void StreamTee::ShipLines(std::string_view data) {
  // The whole lines read go as one chunk: one allocation, however many.
  const size_t last_nl = data.rfind('\n');
  if (last_nl == std::string_view::npos) {
    ship_partial_.append(data);
    // A line that never ends is shipped in pieces: the tee holds at most one.
    if (ship_partial_.size() > rdzv::kMaxLogLineBytes) ShipTail();
    return;
  }
  LogChunk chunk = NewChunk();
  chunk.text.reserve(ship_partial_.size() + last_nl + 1);
  chunk.text.append(ship_partial_);
  chunk.text.append(data.substr(0, last_nl + 1));
  ship_partial_.assign(data.substr(last_nl + 1));
  chunk.lines = static_cast<size_t>(std::count(data.begin(), data.begin() + last_nl + 1, '\n'));
  options_.shipper->Add(std::move(chunk));
}

void StreamTee::ShipTail() {
  if (options_.shipper == nullptr || ship_partial_.empty()) return;
  LogChunk chunk = NewChunk();
  chunk.text = std::move(ship_partial_);
  chunk.text.push_back('\n');
  chunk.lines = 1;
  ship_partial_.clear();
  options_.shipper->Add(std::move(chunk));
}

void StreamTee::DrainAndFinish() {
  if (done_) return;
  if (reading_) {
    // Its bytes may be in buf_ already, their handler queued: it takes
    // them first, then drains (OnRead). Cancelled, a read still waiting ends now.
    drain_requested_ = true;
    boost::system::error_code ignored;
    pipe_.cancel(ignored);
    return;
  }
  Drain();
}

void StreamTee::Drain() {
  const int fd = paused_fd_ >= 0 ? paused_fd_ : pipe_.native_handle();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  for (;;) {
    ssize_t n = ::read(fd, buf_.data(), buf_.size());
    if (n > 0) {
      Consume(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // end-of-file, nothing more now (EAGAIN), or an error
    }
  }
  Finish();
}

void StreamTee::Finish() {
  if (done_) return;
  done_ = true;
  ShipTail();
  if (WantsLines()) {
    out_.clear();
    prefixer_.Finish(&out_);
    WriteLines();
  }
  boost::system::error_code ignored;
  pace_.cancel();
  pipe_.close(ignored);
  if (paused_fd_ >= 0) ::close(std::exchange(paused_fd_, -1));
  if (file_fd_ >= 0) {
    ::close(file_fd_);
    file_fd_ = -1;
  }
  if (on_eof_) {
    auto cb = std::move(on_eof_);
    on_eof_ = nullptr;
    cb();
  }
}

}  // namespace ctrun::launcher
