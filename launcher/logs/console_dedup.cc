#include "launcher/logs/console_dedup.h"

#include "launcher/logs/stream_tee.h"

namespace ctrun::launcher {

ConsoleDedup::ConsoleDedup(boost::asio::io_context& io, int console_fd, LineDedup::Limits limits)
    : timer_(io), console_fd_(console_fd), dedup_(limits) {}

ConsoleDedup::~ConsoleDedup() { FlushAll(); }

void ConsoleDedup::Add(int rank, std::string_view prefix, std::string_view line) {
  dedup_.Add(rank, prefix, line, Clock::now(), &out_);
  Write();
  Arm();
}

void ConsoleDedup::FlushAll() {
  dedup_.FlushAll(&out_);
  Write();
  if (armed_) {
    timer_.cancel();
    armed_ = false;
  }
}

void ConsoleDedup::Arm() {
  if (armed_) return;
  std::optional<TimePoint> deadline = dedup_.NextDeadline();
  if (!deadline) return;
  armed_ = true;
  timer_.expires_at(*deadline);
  // Cancelled (FlushAll), or this object gone: the handler touches nothing.
  timer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    OnTimer();
  });
}

void ConsoleDedup::OnTimer() {
  armed_ = false;
  dedup_.Flush(Clock::now(), &out_);
  Write();
  Arm();
}

void ConsoleDedup::Write() {
  if (out_.empty()) return;
  if (console_fd_ >= 0) WriteAll(console_fd_, out_);
  out_.clear();
}

}  // namespace ctrun::launcher
