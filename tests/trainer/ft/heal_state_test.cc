// HealState: a model (parameters and buffers), its SGD or Adam state, the
// committed step and the CPU generator through SaveHealState/LoadHealState
// end bitwise equal to the source's; bytes that do not fit touch nothing.
#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include "tests/trainer/catch_after_torch.h"

#include <memory>

#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/ft/heal_state.h"

namespace ct = ctrun::trainer;
namespace ft = ctrun::trainer::ft;

namespace {

// Linear + BatchNorm (running-stat buffers) + Linear, seeded.
torch::nn::Sequential HealTestModel(uint64_t seed, int64_t hidden = 6) {
  at::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(4, hidden), torch::nn::BatchNorm1d(hidden),
                               torch::nn::Linear(hidden, 3));
}

void HealTestTrain(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer, int steps) {
  for (int i = 0; i < steps; ++i) {
    optimizer.zero_grad();
    at::Tensor x = at::randn({8, 4});
    model->forward(x).pow(2).mean().backward();
    optimizer.step();
  }
}

bool HealTestBitwise(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         at::equal(a.contiguous().reshape({-1}).view(at::kByte), b.contiguous().reshape({-1}).view(at::kByte));
}

void HealTestSameModel(torch::nn::Sequential& a, torch::nn::Sequential& b) {
  auto pa = a->parameters(), pb = b->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(HealTestBitwise(pa[i], pb[i]));
  auto ba = a->buffers(), bb = b->buffers();
  REQUIRE(ba.size() == bb.size());
  for (size_t i = 0; i < ba.size(); ++i) CHECK(HealTestBitwise(ba[i], bb[i]));
}

void HealTestSameState(const torch::optim::Optimizer& a, torch::nn::Sequential& ma, const torch::optim::Optimizer& b,
                       torch::nn::Sequential& mb) {
  auto pa = ma->parameters(), pb = mb->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto sa = ct::GetParamState(a, pa[i]);
    auto sb = ct::GetParamState(b, pb[i]);
    REQUIRE(sa.ok());
    REQUIRE(sb.ok());
    REQUIRE(sa->size() == sb->size());
    CHECK(!sa->empty());
    for (const auto& [key, value] : *sa) CHECK(HealTestBitwise(value, sb->at(key)));
  }
}

}  // namespace

TEST_CASE("HealState: SGD with momentum, buffers, step and RNG end bitwise equal") {
  auto source = HealTestModel(1);
  torch::optim::SGD source_opt(source->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  HealTestTrain(source, source_opt, 3);
  auto bytes = ft::SaveHealState(*source, source_opt, 3);
  REQUIRE(bytes.ok());
  const at::Tensor source_next = at::rand({5});

  auto healer = HealTestModel(2);
  torch::optim::SGD healer_opt(healer->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  at::manual_seed(99);
  auto step = ft::LoadHealState(*bytes, *healer, healer_opt);
  REQUIRE(step.ok());
  CHECK(*step == 3);
  CHECK(HealTestBitwise(at::rand({5}), source_next));
  HealTestSameModel(source, healer);
  HealTestSameState(source_opt, source, healer_opt, healer);
  // Both train on: still bitwise equal.
  at::manual_seed(5);
  HealTestTrain(source, source_opt, 2);
  at::manual_seed(5);
  HealTestTrain(healer, healer_opt, 2);
  HealTestSameModel(source, healer);
  HealTestSameState(source_opt, source, healer_opt, healer);
}

TEST_CASE("HealState: Adam's moments and step end bitwise equal") {
  auto source = HealTestModel(3);
  torch::optim::Adam source_opt(source->parameters(), torch::optim::AdamOptions(0.01));
  HealTestTrain(source, source_opt, 4);
  auto bytes = ft::SaveHealState(*source, source_opt, 4);
  REQUIRE(bytes.ok());
  auto healer = HealTestModel(4);
  torch::optim::Adam healer_opt(healer->parameters(), torch::optim::AdamOptions(0.01));
  REQUIRE(ft::LoadHealState(*bytes, *healer, healer_opt).ok());
  HealTestSameModel(source, healer);
  HealTestSameState(source_opt, source, healer_opt, healer);
  at::manual_seed(6);
  HealTestTrain(source, source_opt, 1);
  at::manual_seed(6);
  HealTestTrain(healer, healer_opt, 1);
  HealTestSameModel(source, healer);
}

TEST_CASE("HealState: bytes that do not fit are refused and change nothing") {
  auto source = HealTestModel(1);
  torch::optim::SGD source_opt(source->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  HealTestTrain(source, source_opt, 1);
  auto bytes = ft::SaveHealState(*source, source_opt, 1);
  REQUIRE(bytes.ok());

  auto other = HealTestModel(7, /*hidden=*/5);
  auto before = HealTestModel(7, /*hidden=*/5);
  torch::optim::SGD other_opt(other->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto refused = ft::LoadHealState(*bytes, *other, other_opt);
  CHECK(refused.status().code() == ctrun::Status::Code::kInvalidArgument);
  CHECK(refused.status().message().find("has another shape or dtype") != std::string::npos);
  HealTestSameModel(other, before);

  auto garbage = ft::LoadHealState("not a healing state", *other, other_opt);
  CHECK(garbage.status().code() == ctrun::Status::Code::kInvalidArgument);
  CHECK(garbage.status().message().rfind("healing state of 19 bytes", 0) == 0);
  HealTestSameModel(other, before);
}
