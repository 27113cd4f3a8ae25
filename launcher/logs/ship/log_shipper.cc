#include "launcher/logs/ship/log_shipper.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace ctrun::launcher {
namespace {

constexpr std::chrono::seconds kDropWarnInterval{10};
// A refusal (token, version, unknown run) is not fixed by retrying soon.
constexpr std::chrono::seconds kRefusedRetryDelay{10};

}  // namespace

LogShipper::LogShipper(rdzv::LogSinkFactory make_sink, LogQueueLimits limits)
    : make_sink_(std::move(make_sink)), queue_(limits) {
  thread_ = std::thread([this] { Loop(); });
}

LogShipper::~LogShipper() { Stop(Duration::zero()); }

void LogShipper::Add(LogChunk chunk) {
  if (chunk.lines == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  const bool was_empty = queue_.lines() == 0;
  const bool was_small = queue_.bytes() < kShipBatchBytes;
  queue_.Push(std::move(chunk));
  // Wake the thread only on a transition: the first line starts the batch
  // interval, a full batch goes at once.
  if (was_empty || (was_small && queue_.bytes() >= kShipBatchBytes)) cv_.notify_one();
}

void LogShipper::Stop(Duration budget) {
  const TimePoint start = Clock::now();
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
    stop_deadline_ = Clock::now() + budget;
    cv_.notify_all();
    // The thread sends until the deadline; a send still blocked then is cancelled.
    if (!cv_.wait_until(lock, stop_deadline_, [this] { return !thread_running_; })) {
      if (sending_) sending_->Cancel();
    }
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  spdlog::debug("share-logs: shipped {} lines in {} bytes, dropped {}; the last ones took {:.3f} s",
                lines_sent_, wire_bytes_, queue_.total_dropped(),
                std::chrono::duration<double>(Clock::now() - start).count());
}

uint64_t LogShipper::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.total_dropped();
}

void LogShipper::NoteDrops(uint64_t total) {
  if (total <= warned_dropped_) return;
  const TimePoint now = Clock::now();
  if (warned_dropped_ != 0 && now - last_warn_ < kDropWarnInterval) return;
  spdlog::warn("share-logs: dropped {} lines; the rendezvous host is not keeping up", total - warned_dropped_);
  warned_dropped_ = total;
  last_warn_ = now;
}

void LogShipper::Loop() {
  std::unique_ptr<rdzv::LogSink> sink;
  TimePoint retry_at{};
  bool failing = false;  // said once per streak of failures
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto wake = [this] { return stopping_ || !queue_.empty(); };
    if (sink && !cv_.wait_for(lock, kShipIdleClose, wake)) {
      // Idle: end the stream rather than have the server cut it.
      sending_ = sink.get();
      lock.unlock();
      (void)sink->Finish(kShipIdleClose);
      lock.lock();
      sending_ = nullptr;
      wire_bytes_ += sink->WireBytes();
      lock.unlock();
      sink.reset();
      lock.lock();
      continue;
    }
    cv_.wait(lock, wake);
    if (!stopping_) {
      // Collect a batch's worth, or what comes within the interval.
      cv_.wait_for(lock, kShipInterval, [this] { return stopping_ || queue_.bytes() >= kShipBatchBytes; });
    }
    if (stopping_ && (queue_.empty() || Clock::now() >= stop_deadline_)) break;
    if (queue_.empty()) continue;
    if (!sink) {
      if (Clock::now() < retry_at) {
        cv_.wait_until(lock, stopping_ ? std::min(retry_at, stop_deadline_) : retry_at, [this] { return stopping_; });
        if (stopping_ && Clock::now() >= std::min(retry_at, stop_deadline_)) break;
        continue;
      }
      lock.unlock();
      std::unique_ptr<rdzv::LogSink> made = make_sink_();
      lock.lock();
      sink = std::move(made);
    }
    uint64_t dropped = 0;
    std::vector<LogChunk> batch = queue_.TakeBatch(kShipBatchBytes, &dropped);
    uint64_t lines = 0;
    for (const LogChunk& c : batch) lines += c.lines;
    NoteDrops(queue_.total_dropped());
    sending_ = sink.get();
    lock.unlock();
    const Status s = sink->Send(batch, dropped);
    lock.lock();
    sending_ = nullptr;
    if (s.ok()) {
      lines_sent_ += lines;
      if (failing) spdlog::info("share-logs: shipping logs to the rendezvous again");
      failing = false;
      continue;
    }
    queue_.NoteLost(lines + dropped);
    if (!failing && !stopping_) {
      spdlog::warn("share-logs: cannot ship worker logs to the rendezvous: {}; retrying (lines are dropped "
                   "meanwhile once the queue is full)",
                   s.message());
    }
    failing = true;
    wire_bytes_ += sink->WireBytes();
    lock.unlock();
    sink.reset();
    lock.lock();
    const bool refused = s.code() == Status::Code::kFailedPrecondition || s.code() == Status::Code::kNotFound;
    retry_at = Clock::now() + (refused ? Duration(kRefusedRetryDelay) : Duration(kShipRetryDelay));
  }
  if (sink) {
    sending_ = sink.get();
    const Duration left = std::max(Duration::zero(), stop_deadline_ - Clock::now());
    lock.unlock();
    (void)sink->Finish(left);
    lock.lock();
    sending_ = nullptr;
    wire_bytes_ += sink->WireBytes();
    lock.unlock();
    sink.reset();
    lock.lock();
  }
  thread_running_ = false;
  cv_.notify_all();
}

}  // namespace ctrun::launcher
