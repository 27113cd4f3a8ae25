// CheckedMutex: a std::mutex that knows which thread holds it, so that a
// function whose contract says "requires mu_" can check it: gcc has no
// -Wthread-safety. Lockable: use it with std::lock_guard, std::unique_lock
// and std::condition_variable_any.
//
// The check is on in every build (the default RelWithDebInfo build defines
// NDEBUG, so an assert would never run): it costs one relaxed atomic store
// per lock and unlock and one load per AssertHeld.
//
// Thread model: thread-safe, like std::mutex. Not copyable.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

namespace ctrun::rdzv {

class CheckedMutex {
 public:
  CheckedMutex() = default;
  CheckedMutex(const CheckedMutex&) = delete;
  CheckedMutex& operator=(const CheckedMutex&) = delete;

  void lock() {
    mu_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  bool try_lock() {
    if (!mu_.try_lock()) return false;
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  void unlock() {
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    mu_.unlock();
  }

  // Returns when the calling thread holds the mutex; otherwise prints `who`
  // (the function whose contract was broken) on stderr and aborts.
  void AssertHeld(const char* who) const;

 private:
  std::mutex mu_;
  // Only the holder stores its own id, so a thread reads its own id here
  // exactly when it holds the mutex; relaxed order is enough for that.
  std::atomic<std::thread::id> owner_{};
};

}  // namespace ctrun::rdzv
