// CommandHealthCheck: the real HealthChecker — runs the user's command
// (--health-check CMD) as `/bin/sh -c CMD` and calls the node healthy when
// it exits 0 within the timeout (--health-check-timeout).
//
// The process is started by a WorkerGroup of its own (a WorkerSet: its own
// process group, reaped through SIGCHLD), never by this file; its stdout and
// stderr are read from pipes on the io_context into an OutputTail, so the
// agent's loop never blocks on it. A check still running at the timeout is
// killed with its whole process group (SIGKILL) and counts as failed; so
// does one that cannot be started. Once the group is gone, what is left in
// the pipes is read without waiting and at most the pipe's capacity (64 KiB
// to 1 MiB) of it: a descendant that left the group and keeps writing
// cannot hold the loop. The pipes are then closed (such a writer gets EPIPE).
//
// Ownership: borrows `io` and `runner`, which must outlive it; `runner`
// must serve nothing else. Thread model: io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "launcher/health/health_check.h"
#include "launcher/health/output_tail.h"
#include "launcher/process/worker_group.h"

namespace ctrun::launcher {

class CommandHealthCheck : public HealthChecker {
 public:
  // `env`: the check's whole environment ("KEY=VALUE").
  CommandHealthCheck(boost::asio::io_context& io, WorkerGroup& runner, std::string command,
                     Duration timeout, std::vector<std::string> env);
  ~CommandHealthCheck() override;
  CommandHealthCheck(const CommandHealthCheck&) = delete;
  CommandHealthCheck& operator=(const CommandHealthCheck&) = delete;

  void Run(Done done) override;
  void Cancel() override;
  const std::string& command() const override { return command_; }

 private:
  void Read(size_t index, uint64_t run);
  void OnExit(const WorkerExit& exit, uint64_t run);
  void OnTimeout(uint64_t run);
  // Kills what is left of the check's process group; then finishes.
  void CloseThenFinish(uint64_t run);
  void Finish(uint64_t run);
  void CloseStreams();

  boost::asio::io_context& io_;
  WorkerGroup& runner_;
  std::string command_;
  Duration timeout_;
  std::vector<std::string> env_;
  boost::asio::steady_timer timer_;
  std::array<std::unique_ptr<boost::asio::posix::stream_descriptor>, 2> streams_;
  std::array<char, 4096> buffer_[2];
  OutputTail tail_;
  uint64_t run_ = 0;          // increases per Run and per Cancel: stale callbacks check it
  bool running_ = false;
  bool closing_ = false;
  HealthResult result_;
  Done done_;
};

}  // namespace ctrun::launcher
