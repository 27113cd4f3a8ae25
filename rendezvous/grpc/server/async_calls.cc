#include "rendezvous/grpc/server/async_calls.h"

namespace ctrun::rdzv {

void LiveCalls::Add() {
  std::lock_guard<std::mutex> lock(mu_);
  ++n_;
}

void LiveCalls::Remove() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--n_ == 0) none_.notify_all();
}

void LiveCalls::WaitNone() {
  std::unique_lock<std::mutex> lock(mu_);
  none_.wait(lock, [this] { return n_ == 0; });
}

}  // namespace ctrun::rdzv
