// ServerTimer: when the server's timer thread next wakes. The thread
// (RendezvousServer::Impl::TimerLoop) runs turns: each starts with
// StartTurn, considers every deadline it did not act on (Consider), and
// sleeps until the earliest (Sleep); a step that makes an earlier deadline
// wakes it (WakeBy), and Shutdown wakes it for good (WakeAll).
//
// Locking: everything under the server's mutex (`mu`, which WakeBy checks);
// Sleep releases it while it waits.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>

#include "base/clock.h"
#include "rendezvous/grpc/server/checked_mutex.h"

namespace ctrun::rdzv {

class ServerTimer {
 public:
  explicit ServerTimer(CheckedMutex& mu) : mu_(mu) {}
  ServerTimer(const ServerTimer&) = delete;
  ServerTimer& operator=(const ServerTimer&) = delete;

  // Wakes the thread when `next` comes before the time it sleeps until.
  // Requires mu.
  void WakeBy(std::optional<TimePoint> next) {
    mu_.AssertHeld("ServerTimer::WakeBy");
    if (next && (!target_ || *next < *target_)) {
      dirty_ = true;
      cv_.notify_one();
    }
  }
  // Wakes the thread whatever it waits for (Shutdown, once stopping is set).
  void WakeAll() { cv_.notify_all(); }

  // A turn starts: nothing woke it yet, and it has no deadline yet.
  void StartTurn() {
    dirty_ = false;
    target_.reset();
  }
  // The turn found a deadline it does not act on now: it sleeps no later.
  void Consider(std::optional<TimePoint> next) {
    if (next && (!target_ || *next < *target_)) target_ = next;
  }
  // Sleeps, `lock` (on mu) released meanwhile, until the turn's earliest
  // deadline, a WakeBy, or `stop()` (checked under the lock) holds.
  template <class Stop>
  void Sleep(std::unique_lock<CheckedMutex>& lock, Stop stop) {
    auto woken = [this, &stop] { return stop() || dirty_; };
    if (target_) {
      cv_.wait_until(lock, *target_, woken);
    } else {
      cv_.wait(lock, woken);
    }
  }

 private:
  CheckedMutex& mu_;
  std::condition_variable_any cv_;
  bool dirty_ = false;                // guarded by mu
  std::optional<TimePoint> target_;   // guarded by mu
};

}  // namespace ctrun::rdzv
