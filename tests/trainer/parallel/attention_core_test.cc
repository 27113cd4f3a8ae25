// AttentionCore (trainer/parallel/attention_core.h): the textbook causal
// attention's values and gradients, causal, the same bits on every call (what
// recomputation relies on), and its clock counts its calls.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include "tests/trainer/catch_after_torch.h"

#include <cmath>
#include <limits>
#include <vector>

#include "trainer/parallel/attention_core.h"

namespace ct = ctrun::trainer;

namespace {

// softmax(mask(q k^T / sqrt(hd))) v, the way the formula reads.
at::Tensor TextbookAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t seq = q.size(2);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)));
  at::Tensor future = at::ones({seq, seq}, at::kBool).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  return at::matmul(at::softmax(scores, -1), v);
}

// q, k, v of [B=2, heads=3, S=5, hd=4], laid out as the attention module
// makes them: views of [B, S, heads, hd] with heads and S swapped.
std::vector<at::Tensor> MakeQkv(uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<at::Tensor> qkv;
  for (int i = 0; i < 3; ++i) {
    qkv.push_back(at::randn({2, 5, 3, 4}, gen, at::kFloat).transpose(1, 2).detach().requires_grad_(true));
  }
  return qkv;
}

}  // namespace

TEST_CASE("AttentionCore: the textbook causal attention, values and gradients") {
  std::vector<at::Tensor> qkv = MakeQkv(1);
  at::Tensor context = ct::AttentionCore(qkv)[0];
  at::Tensor expected = TextbookAttention(qkv[0], qkv[1], qkv[2]);
  REQUIRE(context.sizes() == expected.sizes());
  CHECK(at::allclose(context, expected, 1e-5, 1e-6));
  at::Tensor weights = at::randn(context.sizes(), at::kFloat);
  std::vector<at::Tensor> grads = torch::autograd::grad({(context * weights).sum()}, qkv);
  std::vector<at::Tensor> expected_grads = torch::autograd::grad({(expected * weights).sum()}, qkv);
  for (size_t i = 0; i < 3; ++i) {
    INFO("input " << i);
    CHECK(at::allclose(grads[i], expected_grads[i], 1e-4, 1e-5));
  }
}

TEST_CASE("AttentionCore: query i sees keys and values up to i only") {
  std::vector<at::Tensor> qkv = MakeQkv(2);
  at::Tensor before = ct::AttentionCore(qkv)[0];
  std::vector<at::Tensor> changed = {qkv[0], qkv[1].clone(), qkv[2].clone()};
  changed[1].select(2, 4).fill_(7);  // the last position's key and value
  changed[2].select(2, 4).fill_(-3);
  at::Tensor after = ct::AttentionCore(changed)[0];
  CHECK(at::equal(before.narrow(2, 0, 4), after.narrow(2, 0, 4)));
  CHECK_FALSE(at::equal(before.select(2, 4), after.select(2, 4)));
}

TEST_CASE("AttentionCore: every call gives the same bits, with grad on or off") {
  std::vector<at::Tensor> qkv = MakeQkv(3);
  at::Tensor first = ct::AttentionCore(qkv)[0];
  at::Tensor again;
  {
    at::NoGradGuard no_grad;
    again = ct::AttentionCore(qkv)[0];
  }
  CHECK(at::equal(first, again));
  CHECK_FALSE(at::equal(first, ct::AttentionCore(MakeQkv(4))[0]));
}

TEST_CASE("AttentionCore: its clock counts the time of its calls") {
  const ct::CoreTime before = ct::AttentionCoreTime();
  ct::AttentionCore(MakeQkv(5));
  const ct::CoreTime after = ct::AttentionCoreTime();
  CHECK(after.wall_seconds > before.wall_seconds);
  CHECK(after.cpu_seconds >= before.cpu_seconds);
}
