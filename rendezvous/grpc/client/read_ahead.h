// ReadAhead: reads a gRPC server stream (the sync API's ClientReader) on a
// thread of its own, up to `depth` messages ahead of its caller, so that a
// Read is pending while the caller handles the previous message. gRPC opens
// a stream's flow-control window for a pending Read: a reader that only
// reads between handling messages holds the server's next message back
// for as long as it handles one (`ctrun logs --follow` printing a few
// MiB), and the server's one write in flight waits with it.
//
// Bounds: at most `depth` messages are kept (one handed out, the others
// read or being read); their memory is reused.
//
// Thread model: Next and the destructor are called from one thread. The
// reader is read only by ReadAhead's thread from construction until Next
// returns null or the destructor ends; the caller calls its Finish after
// that. To stop early, cancel the call's context (its pending Read then
// fails) and destroy the ReadAhead.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace ctrun::rdzv {

template <class Message>
class ReadAhead {
 public:
  ReadAhead(grpc::ClientReaderInterface<Message>* reader, size_t depth) : reader_(reader), slots_(depth < 2 ? 2 : depth) {
    for (Message& m : slots_) free_.push_back(&m);
    thread_ = std::thread([this] { Run(); });
  }
  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The next message in stream order, or null once the stream has ended (a
  // Read failed: the caller's Finish tells why). Valid until the next call;
  // the previous one's memory goes back to the reading thread.
  Message* Next() {
    std::unique_lock<std::mutex> lock(mu_);
    if (current_) {
      free_.push_back(current_);
      current_ = nullptr;
      cv_.notify_all();
    }
    cv_.wait(lock, [this] { return !full_.empty() || ended_; });
    if (full_.empty()) return nullptr;
    current_ = full_.front();
    full_.pop_front();
    return current_;
  }

 private:
  void Run() {
    for (;;) {
      Message* m = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !free_.empty() || stop_; });
        if (stop_) break;
        m = free_.back();
        free_.pop_back();
      }
      const bool ok = reader_->Read(m);
      std::lock_guard<std::mutex> lock(mu_);
      if (!ok) {
        free_.push_back(m);
        break;
      }
      full_.push_back(m);
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    cv_.notify_all();
  }

  grpc::ClientReaderInterface<Message>* const reader_;
  std::vector<Message> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message*> free_;   // guarded by mu_
  std::deque<Message*> full_;    // guarded by mu_; read, in stream order
  Message* current_ = nullptr;   // guarded by mu_; handed out by Next
  bool ended_ = false;           // guarded by mu_
  bool stop_ = false;            // guarded by mu_
  std::thread thread_;
};

}  // namespace ctrun::rdzv
