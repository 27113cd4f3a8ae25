// The agent's shipper against fake sinks: lines arrive in order and Stop
// sends what is queued; a full queue drops the oldest and says how many in
// the next batch; a sink that never returns is cancelled at Stop's budget.
// Waits are on conditions with deadlines.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "launcher/logs/ship/log_shipper.h"

namespace ctrun::launcher {
namespace {

struct Received {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> lines;
  uint64_t dropped = 0;
  int sinks = 0;
  int finished = 0;
  bool block = false;      // Send waits until cancelled
  bool cancelled = false;
};

class FakeSink final : public rdzv::LogSink {
 public:
  explicit FakeSink(std::shared_ptr<Received> r) : r_(std::move(r)) {}
  Status Send(std::vector<LogChunk>& chunks, uint64_t dropped) override {
    std::unique_lock<std::mutex> lock(r_->mu);
    if (r_->block) {
      r_->cv.wait(lock, [&] { return r_->cancelled; });
      return Status::Aborted("cancelled");
    }
    for (const LogChunk& c : chunks) rdzv::ForEachLine(c.text, [&](std::string_view l) { r_->lines.emplace_back(l); });
    r_->dropped += dropped;
    r_->cv.notify_all();
    return Status::Ok();
  }
  Status Finish(Duration) override {
    std::lock_guard<std::mutex> lock(r_->mu);
    ++r_->finished;
    return Status::Ok();
  }
  void Cancel() override {
    std::lock_guard<std::mutex> lock(r_->mu);
    r_->cancelled = true;
    r_->cv.notify_all();
  }
  uint64_t WireBytes() const override { return 0; }

 private:
  std::shared_ptr<Received> r_;
};

rdzv::LogSinkFactory Factory(const std::shared_ptr<Received>& r) {
  return [r]() -> std::unique_ptr<rdzv::LogSink> {
    std::lock_guard<std::mutex> lock(r->mu);
    ++r->sinks;
    return std::make_unique<FakeSink>(r);
  };
}

LogChunk ShipperChunk(int rank, const std::string& text, size_t lines) {
  LogChunk c;
  c.rank = rank;
  c.text = text;
  c.lines = lines;
  return c;
}

TEST_CASE("log shipper: lines reach the sink in order, Stop sends the rest and ends the stream") {
  auto r = std::make_shared<Received>();
  LogShipper shipper(Factory(r));
  shipper.Add(ShipperChunk(0, "a\nb\n", 2));
  {
    std::unique_lock<std::mutex> lock(r->mu);
    REQUIRE(r->cv.wait_for(lock, std::chrono::seconds(10), [&] { return r->lines.size() == 2; }));
  }
  shipper.Add(ShipperChunk(1, "c\n", 1));
  shipper.Stop(std::chrono::seconds(5));
  shipper.Add(ShipperChunk(1, "late\n", 1));  // ignored after Stop
  std::lock_guard<std::mutex> lock(r->mu);
  CHECK(r->lines == std::vector<std::string>{"a", "b", "c"});
  CHECK(r->sinks == 1);
  CHECK(r->finished == 1);
  CHECK(r->dropped == 0);
}

TEST_CASE("log shipper: a full queue drops the oldest and the next batch says how many") {
  auto r = std::make_shared<Received>();
  // Lines queued before the first batch is due (50 ms): the queue holds 2.
  LogShipper shipper(Factory(r), LogQueueLimits{2, 1 << 20});
  for (int i = 0; i < 5; ++i) shipper.Add(ShipperChunk(0, std::to_string(i) + "\n", 1));
  shipper.Stop(std::chrono::seconds(5));
  std::lock_guard<std::mutex> lock(r->mu);
  CHECK(r->lines.size() + r->dropped == 5);
  CHECK(shipper.dropped() == r->dropped);
  REQUIRE_FALSE(r->lines.empty());
  CHECK(r->lines.back() == "4");  // the newest is kept
}

TEST_CASE("log shipper: a sink that never returns is cancelled at Stop's budget") {
  auto r = std::make_shared<Received>();
  r->block = true;
  LogShipper shipper(Factory(r));
  shipper.Add(ShipperChunk(0, "x\n", 1));
  {
    // The batch is in Send (the sink was made) before Stop begins.
    std::unique_lock<std::mutex> lock(r->mu);
    REQUIRE(r->cv.wait_for(lock, std::chrono::seconds(10), [&] { return r->sinks == 1; }));
  }
  const auto start = std::chrono::steady_clock::now();
  shipper.Stop(std::chrono::milliseconds(200));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  std::lock_guard<std::mutex> lock(r->mu);
  CHECK(r->cancelled);
}

}  // namespace
}  // namespace ctrun::launcher
