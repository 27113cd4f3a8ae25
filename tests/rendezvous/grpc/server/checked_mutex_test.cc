#include "rendezvous/grpc/server/checked_mutex.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ctrun::rdzv {
namespace {

// AssertHeld aborts when the contract is broken, which a test cannot watch;
// these cases show that it passes wherever the lock is in fact held.

TEST_CASE("CheckedMutex: AssertHeld passes under lock_guard and unique_lock, on any thread") {
  CheckedMutex mu;
  {
    std::lock_guard<CheckedMutex> lock(mu);
    mu.AssertHeld("test");
  }
  std::thread other([&mu] {
    std::unique_lock<CheckedMutex> lock(mu);
    mu.AssertHeld("other thread");
    lock.unlock();
    REQUIRE(mu.try_lock());
    mu.AssertHeld("try_lock");
    mu.unlock();
  });
  other.join();
}

TEST_CASE("CheckedMutex: a condition_variable_any wait gives the lock back to the waiter") {
  CheckedMutex mu;
  std::condition_variable_any cv;
  bool ready = false;
  std::thread waiter([&] {
    std::unique_lock<CheckedMutex> lock(mu);
    cv.wait(lock, [&] { return ready; });
    mu.AssertHeld("after wait");
  });
  {
    std::lock_guard<CheckedMutex> lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
}

}  // namespace
}  // namespace ctrun::rdzv
