#include "launcher/health/command_check.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>

namespace ctrun::launcher {

namespace {

// How long the check's process group may outlive SIGKILL before we stop
// waiting for it (a check stuck in uninterruptible sleep is itself a sign).
constexpr Duration kKillTimeout = std::chrono::seconds(5);

// The most Finish reads from one of the check's pipes: the pipe's capacity
// (what the ended group can have left in it), within [64 KiB, 1 MiB].
constexpr size_t kMinFinishDrain = 64 * 1024;
constexpr size_t kMaxFinishDrain = 1024 * 1024;
size_t FinishDrainCap(int fd) {
  const int capacity = ::fcntl(fd, F_GETPIPE_SZ);
  if (capacity <= 0) return kMinFinishDrain;
  return std::clamp(static_cast<size_t>(capacity), kMinFinishDrain, kMaxFinishDrain);
}

std::string SecondsText(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

CommandHealthCheck::CommandHealthCheck(boost::asio::io_context& io, WorkerGroup& runner,
                                       std::string command, Duration timeout,
                                       std::vector<std::string> env)
    : io_(io),
      runner_(runner),
      command_(std::move(command)),
      timeout_(timeout),
      env_(std::move(env)),
      timer_(io) {}

CommandHealthCheck::~CommandHealthCheck() { CloseStreams(); }

void CommandHealthCheck::Run(Done done) {
  ++run_;
  const uint64_t run = run_;
  done_ = std::move(done);
  tail_ = OutputTail();
  result_ = HealthResult();
  running_ = true;
  closing_ = false;
  WorkerSpec spec;
  spec.argv = {"/bin/sh", "-c", command_};
  spec.env = env_;
  spec.out.mode = StdioTarget::Mode::kPipe;
  spec.err.mode = StdioTarget::Mode::kPipe;
  std::vector<std::pair<int, int>> pipes;
  Status s = runner_.Start({spec}, [this, run](const WorkerExit& e) { OnExit(e, run); }, &pipes);
  if (!s.ok()) {
    result_.healthy = false;
    result_.failure = "could not start: " + s.message();
    Finish(run);
    return;
  }
  const int fds[2] = {pipes[0].first, pipes[0].second};
  for (size_t i = 0; i < 2; ++i) {
    if (fds[i] < 0) continue;
    streams_[i] = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fds[i]);
    Read(i, run);
  }
  timer_.expires_after(timeout_);
  timer_.async_wait([this, run](const boost::system::error_code& ec) {
    if (!ec) OnTimeout(run);
  });
}

void CommandHealthCheck::Read(size_t index, uint64_t run) {
  if (!streams_[index]) return;
  streams_[index]->async_read_some(
      boost::asio::buffer(buffer_[index]),
      [this, index, run](const boost::system::error_code& ec, size_t n) {
        if (run != run_ || !streams_[index]) return;
        tail_.Append(std::string_view(buffer_[index].data(), n));
        if (!ec) Read(index, run);
      });
}

void CommandHealthCheck::OnExit(const WorkerExit& e, uint64_t run) {
  if (run != run_ || !running_ || closing_) return;
  if (e.exit_code > 0) {
    result_.healthy = false;
    result_.failure = "exited with " + std::to_string(e.exit_code);
  } else if (e.exit_code < 0) {
    result_.healthy = false;
    result_.failure = "was killed by signal " + std::to_string(-e.exit_code);
  }
  CloseThenFinish(run);
}

void CommandHealthCheck::OnTimeout(uint64_t run) {
  if (run != run_ || !running_ || closing_) return;
  result_.healthy = false;
  result_.failure = "timed out after " + SecondsText(timeout_) + " s (--health-check-timeout)";
  CloseThenFinish(run);
}

// Descendants left in the check's process group go too; once the group is
// empty, whatever it wrote is in the pipes.
void CommandHealthCheck::CloseThenFinish(uint64_t run) {
  closing_ = true;
  timer_.cancel();
  runner_.Close(SIGKILL, Duration::zero(), kKillTimeout,
                [this, run](const std::vector<StuckProcess>& stuck) {
                  if (run != run_) return;
                  if (!stuck.empty() && result_.healthy) {
                    result_.healthy = false;
                    result_.failure = "left processes that outlived SIGKILL";
                  }
                  Finish(run);
                });
}

void CommandHealthCheck::Finish(uint64_t run) {
  // Read what is left without waiting: a descendant that left the process
  // group may hold a pipe open for ever, and may keep writing to it. The
  // group is gone, so all it wrote is in the pipe: at most the pipe's
  // capacity. Reading that much, and no more, keeps the check's own last
  // lines and bounds the time spent here; closing the pipe then ends such a
  // writer (EPIPE).
  for (auto& stream : streams_) {
    if (!stream) continue;
    const int fd = stream->native_handle();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    size_t left = FinishDrainCap(fd);
    char buf[4096];
    for (ssize_t n; left > 0 && (n = ::read(fd, buf, std::min(sizeof buf, left))) > 0;) {
      tail_.Append(std::string_view(buf, n));
      left -= static_cast<size_t>(n);
    }
  }
  CloseStreams();
  result_.last_lines = tail_.Lines();
  running_ = false;
  boost::asio::post(io_, [this, run] {
    if (run != run_) return;
    Done done = std::move(done_);
    done_ = nullptr;
    if (done) done(result_);
  });
}

void CommandHealthCheck::Cancel() {
  if (!running_) return;
  ++run_;
  running_ = false;
  timer_.cancel();
  CloseStreams();
  done_ = nullptr;
  runner_.Close(SIGKILL, Duration::zero(), kKillTimeout, [](const std::vector<StuckProcess>&) {});
}

void CommandHealthCheck::CloseStreams() {
  for (auto& stream : streams_) {
    if (!stream) continue;
    boost::system::error_code ignored;
    stream->close(ignored);
    stream.reset();
  }
}

}  // namespace ctrun::launcher
