// LogShipper: --share-logs on one agent. The tees hand it every worker line
// they read (Add, a chunk of lines at a time: cheap, never blocks on the
// network); its own thread
// batches them (every kShipInterval, or at once when kShipBatchBytes are
// queued) and sends each batch on a LogSink (a ShipLogs stream to the
// rendezvous server), making a new sink after an error (after a pause of
// kShipRetryDelay). The queue is bounded (LogQueue): when the server does
// not keep up the oldest lines are dropped, counted, sent as a gap, and said
// once per burst on the agent's log.
//
// Ownership: owns its queue, thread and sinks. Thread model: Add from
// any thread (the agent's io_context); Stop and the destructor from the
// owner's thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "launcher/logs/ship/log_queue.h"
#include "rendezvous/logs/log_sink.h"

namespace ctrun::launcher {

inline constexpr std::chrono::milliseconds kShipInterval{50};
inline constexpr size_t kShipBatchBytes = 256 * 1024;
inline constexpr std::chrono::seconds kShipRetryDelay{1};
// How long an agent sends what is queued at the end of its run.
inline constexpr std::chrono::seconds kShareLogsFlush{1};
// A stream with nothing to send for this long is ended (a new one is made
// for the next line); the server ends idle ones after a longer bound.
inline constexpr std::chrono::seconds kShipIdleClose{30};

class LogShipper {
 public:
  // Starts the thread; the first sink is made when the first batch is due.
  LogShipper(rdzv::LogSinkFactory make_sink, LogQueueLimits limits = {});
  ~LogShipper();  // Stop(0)
  LogShipper(const LogShipper&) = delete;
  LogShipper& operator=(const LogShipper&) = delete;

  // Queues a chunk of a worker stream's whole lines. No-op after Stop.
  void Add(LogChunk chunk);

  // Sends what is queued for at most `budget`, ends the stream and joins the
  // thread; lines not sent by then are dropped. Idempotent.
  void Stop(Duration budget);

  // Lines dropped so far because the queue was full (for tests, logs).
  uint64_t dropped() const;

 private:
  void Loop();
  // Sends one batch; false when the sink failed (it is dropped).
  bool SendBatch(std::unique_lock<std::mutex>& lock);
  void NoteDrops(uint64_t total);

  rdzv::LogSinkFactory make_sink_;
  mutable std::mutex mu_;  // guards the members below, up to thread_
  std::condition_variable cv_;
  LogQueue queue_;
  bool stopping_ = false;
  bool stopped_ = false;
  TimePoint stop_deadline_{};
  rdzv::LogSink* sending_ = nullptr;  // the sink in a Send/Finish (Stop cancels it at the deadline)
  uint64_t warned_dropped_ = 0;       // drops already said on the log
  TimePoint last_warn_{};
  bool thread_running_ = true;  // Loop has not returned
  uint64_t lines_sent_ = 0;
  uint64_t wire_bytes_ = 0;     // of the sinks made and dropped
  std::thread thread_;
};

}  // namespace ctrun::launcher
