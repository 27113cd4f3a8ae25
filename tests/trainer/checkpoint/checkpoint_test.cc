#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include "tests/trainer/catch_after_torch.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "trainer/checkpoint/checkpoint.h"

namespace ct = ctrun::trainer;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  Fixture() : dir(fs::temp_directory_path() / ("ctrun_ckpt_" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    path = (dir / "checkpoint.pt").string();
  }
  ~Fixture() { fs::remove_all(dir); }

  std::string Read() const {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void Write(const std::string& bytes) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }

  fs::path dir;
  std::string path;
};

// One SGD step with momentum, so the optimizer has state worth saving.
void TrainOnce(torch::nn::Linear& net, torch::optim::SGD& sgd) {
  sgd.zero_grad();
  net->forward(at::ones({2, 3})).sum().backward();
  sgd.step();
}

ct::TrainPosition Position() { return {.step = 7, .epoch = 1, .epoch_consumed = 64, .world_size = 4, .seed = 3}; }

}  // namespace

TEST_CASE_METHOD(Fixture, "Checkpoint round-trips parameters, optimizer and position") {
  torch::nn::Linear a(3, 2);
  torch::optim::SGD sgd_a(a->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  TrainOnce(a, sgd_a);
  REQUIRE(ct::SaveCheckpoint(path, *a, sgd_a, Position()).ok());
  CHECK_FALSE(fs::exists(path + ".tmp"));

  torch::nn::Linear b(3, 2);
  torch::optim::SGD sgd_b(b->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto loaded = ct::LoadCheckpoint(path, *b, sgd_b);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->has_value());
  CHECK(**loaded == Position());
  CHECK(at::equal(a->weight, b->weight));
  // Same momentum buffers: one more identical step keeps them equal.
  TrainOnce(a, sgd_a);
  TrainOnce(b, sgd_b);
  CHECK(at::equal(a->weight, b->weight));
}

TEST_CASE_METHOD(Fixture, "No checkpoint file means a fresh start") {
  torch::nn::Linear net(3, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto loaded = ct::LoadCheckpoint(path, *net, sgd);
  REQUIRE(loaded.ok());
  CHECK_FALSE(loaded->has_value());
}

TEST_CASE_METHOD(Fixture, "Corrupt checkpoints are rejected and left as they are") {
  torch::nn::Linear net(3, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  REQUIRE(ct::SaveCheckpoint(path, *net, sgd, Position()).ok());
  std::string bytes = Read();
  std::string damaged = bytes;
  std::string needle;
  SECTION("flipped byte") {
    damaged[damaged.size() / 2] ^= 0x40;
    needle = "CRC mismatch";
  }
  SECTION("truncated") {
    damaged.resize(damaged.size() - 10);
    needle = "truncated";
  }
  SECTION("not a checkpoint") {
    damaged = "hello\n";
    needle = "no ctrun checkpoint header";
  }
  Write(damaged);
  const at::Tensor before = net->weight.clone();
  auto loaded = ct::LoadCheckpoint(path, *net, sgd);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().IsInvalidArgument());
  CHECK(loaded.status().message().find(needle) != std::string::npos);
  CHECK(loaded.status().message().find("is corrupt") != std::string::npos);
  CHECK(Read() == damaged);
  CHECK(at::equal(before, net->weight));
}

TEST_CASE_METHOD(Fixture, "A checkpoint of another model is rejected") {
  torch::nn::Linear small(3, 2);
  torch::optim::SGD sgd_small(small->parameters(), 0.1);
  REQUIRE(ct::SaveCheckpoint(path, *small, sgd_small, Position()).ok());
  torch::nn::Linear big(4, 2);
  torch::optim::SGD sgd_big(big->parameters(), 0.1);
  auto loaded = ct::LoadCheckpoint(path, *big, sgd_big);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().message().find("does not match") != std::string::npos);
  CHECK(loaded.status().message().find("'weight' is [2,3]") != std::string::npos);
}

TEST_CASE_METHOD(Fixture, "A failed save keeps the previous checkpoint whole") {
  torch::nn::Linear net(3, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  REQUIRE(ct::SaveCheckpoint(path, *net, sgd, Position()).ok());
  const std::string good = Read();
  fs::create_directories(path + ".tmp");  // the temp file cannot be created
  ctrun::Status status = ct::SaveCheckpoint(path, *net, sgd, Position());
  CHECK(status.code() == ctrun::Status::Code::kIOError);
  CHECK(Read() == good);
}
