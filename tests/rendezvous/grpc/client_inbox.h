// Inbox: a RendezvousClient's Post for tests, running the client's callbacks
// on the test thread (tests/rendezvous/grpc/: net/credentials_test.cc,
// server/server_preempt_test.cc). Test code.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include "rendezvous/grpc/client/client.h"

namespace ctrun::rdzv::testing {

class Inbox {
 public:
  RendezvousClient::Post Poster() {
    return [this](std::function<void()> fn) {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
      cv_.notify_all();
    };
  }
  // Runs posted callbacks until `done` holds or 10 s pass.
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!cv_.wait_until(lock, deadline, [this] { return !queue_.empty(); })) return false;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

}  // namespace ctrun::rdzv::testing
