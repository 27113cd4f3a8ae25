// ConsoleDedup: the I/O shell of LineDedup for one console stream (ctrun's
// stdout or its stderr) under --dedup-logs. The StreamTees of the ranks
// whose lines go to that stream pass their whole lines here instead of
// writing them; the lines leave through LineDedup, and a timer on the
// io_context writes those whose window has closed. FlushAll writes the rest
// (at the end of the attempt, once the tees are drained).
//
// Ownership: owns its LineDedup and timer; `console_fd` is borrowed. Must
// outlive the StreamTees that feed it. Thread model: the io_context's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "launcher/logs/line_dedup.h"

namespace ctrun::launcher {

class ConsoleDedup {
 public:
  ConsoleDedup(boost::asio::io_context& io, int console_fd, LineDedup::Limits limits = {});
  ~ConsoleDedup();
  ConsoleDedup(const ConsoleDedup&) = delete;
  ConsoleDedup& operator=(const ConsoleDedup&) = delete;

  // One whole line (with its '\n') of local rank `rank`; `prefix` is what
  // the console would show before it without --dedup-logs.
  void Add(int rank, std::string_view prefix, std::string_view line);
  // Writes every held line and stops the timer.
  void FlushAll();

 private:
  void Arm();
  void OnTimer();
  void Write();

  boost::asio::steady_timer timer_;
  int console_fd_;
  LineDedup dedup_;
  bool armed_ = false;
  std::string out_;
  // A timer handler already queued when this goes finds it expired.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace ctrun::launcher
