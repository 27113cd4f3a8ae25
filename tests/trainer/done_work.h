// DoneWork: a c10d::Work that has already finished, for the fake
// communicators of the trainer's unit tests. Built with fail = true, its
// wait() throws what a dead Gloo peer gives.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <stdexcept>

namespace ctrun::trainer::testing {

class DoneWork : public c10d::Work {
 public:
  explicit DoneWork(bool fail = false) : fail_(fail) {}
  bool isCompleted() override { return true; }
  bool wait(std::chrono::milliseconds) override {
    if (fail_) throw std::runtime_error("Connection closed by peer [127.0.0.1]:1234\nmore");
    return true;
  }

 private:
  bool fail_;
};

}  // namespace ctrun::trainer::testing
