// DumpFtState (state_dump.h): the parameters, then each one's optimizer
// state (keys in name order), as raw float32.
#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include "tests/trainer/catch_after_torch.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/ft/state_dump.h"

namespace ct = ctrun::trainer;
namespace ft = ctrun::trainer::ft;

namespace {

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  REQUIRE(bytes.size() == out.size() * sizeof(float));
  return out;
}

void Append(std::vector<float>& out, const at::Tensor& t) {
  at::Tensor flat = t.detach().to(at::kFloat).contiguous().reshape({-1});
  out.insert(out.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
}

}  // namespace

TEST_CASE("DumpFtState: parameters, then Adam's state per parameter in key order") {
  at::manual_seed(3);
  torch::nn::Linear model(2, 3);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.1));
  const std::string path = "/tmp/ctrun-state-dump-test." + std::to_string(::getpid());
  const std::vector<at::Tensor> params = model->parameters();
  REQUIRE(ft::DumpFtState(path, params, adam).ok());
  std::vector<float> before;
  for (const auto& p : params) Append(before, p);
  CHECK(ReadFloats(path) == before);  // no state before the first step

  adam.zero_grad();
  model->forward(at::randn({4, 2})).sum().backward();
  adam.step();
  REQUIRE(ft::DumpFtState(path, params, adam).ok());
  std::vector<float> after;
  for (const auto& p : params) Append(after, p);
  for (const auto& p : params) {
    auto state = ct::GetParamState(adam, p);
    REQUIRE(state.ok());
    REQUIRE(state->size() == 3);
    for (const char* key : {"exp_avg", "exp_avg_sq", "step"}) Append(after, state->at(key));  // name order
  }
  CHECK(ReadFloats(path) == after);
  std::remove(path.c_str());
  CHECK(ft::DumpFtState("/nonexistent-dir/x", params, adam).code() == ctrun::Status::Code::kIOError);
}
