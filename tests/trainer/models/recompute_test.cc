// Activation recomputation: Recompute (trainer/parallel/recompute.h) gives
// the gradients of running the function directly, and a GPT trained with
// --recompute full or selective gets bitwise the gradients (and loss) of
// none while holding fewer activation bytes.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "trainer/models/gpt.h"
#include "trainer/parallel/memory_meter.h"
#include "trainer/parallel/recompute.h"
#include "trainer/parallel/recompute_policy.h"

namespace ct = ctrun::trainer;

namespace {

// A toy function with a parameter and dropout: the grads need the same mask.
struct Toy {
  at::Tensor w = torch::randn({6, 5}).requires_grad_(true);
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& in) const {
    at::Tensor h = torch::tanh(at::matmul(in[0], w));
    return {torch::dropout(h, 0.5, /*train=*/true) * in[1], h.sum()};
  }
};

struct ToyGrads {
  at::Tensor x, y, w;
};

ToyGrads RunToy(bool recompute) {
  torch::manual_seed(7);
  Toy toy;
  at::Tensor x = torch::randn({4, 6}).requires_grad_(true);
  at::Tensor y = torch::randn({4, 5}).requires_grad_(true);
  torch::manual_seed(11);
  auto out = recompute ? ct::Recompute(toy, {x, y}, {toy.w}) : toy({x, y});
  // Random numbers drawn between forward and backward must not disturb the replay.
  (void)torch::rand({3});
  (out[0].pow(2).sum() + 3 * out[1]).backward();
  return {x.grad(), y.grad(), toy.w.grad()};
}

struct GptRun {
  at::Tensor loss;
  std::map<std::string, at::Tensor> grads;
  int64_t held_bytes = 0;  // tensor bytes alive after forward, before backward
};

GptRun RunGpt(ct::RecomputePolicy policy) {
  torch::manual_seed(3);
  ct::GptConfig config{.vocab = 32, .width = 16, .heads = 2, .layers = 2, .seq_len = 24, .recompute = policy};
  ct::ShardRegistry registry;
  ct::LayerContext ctx;
  ctx.seed = 5;
  ctx.registry = &registry;
  ct::GptStage model(config, ctx, 0, 1, 0, 2);
  at::Tensor tokens = torch::randint(config.vocab, {3, config.seq_len}, torch::kLong);
  at::Tensor targets = torch::randint(config.vocab, {3, config.seq_len}, torch::kLong);
  GptRun run;
  const int64_t before = ct::TensorMemoryMeter::CurrentBytes();
  run.loss = model->Loss(model->forward(tokens), targets);
  run.held_bytes = ct::TensorMemoryMeter::CurrentBytes() - before;
  run.loss.backward();
  for (const auto& item : model->named_parameters()) run.grads[item.key()] = item.value().grad();
  return run;
}

}  // namespace

TEST_CASE("Recompute: a toy function's input and parameter gradients equal running it directly") {
  ToyGrads direct = RunToy(false);
  ToyGrads again = RunToy(true);
  REQUIRE(again.x.defined());
  REQUIRE(again.y.defined());
  REQUIRE(again.w.defined());
  CHECK(torch::equal(direct.x, again.x));
  CHECK(torch::equal(direct.y, again.y));
  CHECK(torch::equal(direct.w, again.w));
}

TEST_CASE("Recompute: a parameter's gradient accumulates once per backward") {
  Toy toy;
  at::Tensor x = torch::randn({2, 6});  // no input requires grad: the parameter still gets its gradient
  at::Tensor y = torch::ones({2, 5});
  ct::Recompute(toy, {x, y}, {toy.w}, /*preserve_rng_state=*/true)[1].backward();
  at::Tensor once = toy.w.grad().clone();
  ct::Recompute(toy, {x, y}, {toy.w})[1].backward();
  CHECK(torch::equal(toy.w.grad(), 2 * once));
}

TEST_CASE("GPT: full and selective recomputation give bitwise the gradients of none, with less held") {
  ct::TensorMemoryMeter::Install();
  GptRun none = RunGpt(ct::RecomputePolicy::kNone);
  for (auto policy : {ct::RecomputePolicy::kFull, ct::RecomputePolicy::kSelective}) {
    INFO("--recompute " << ct::RecomputePolicyName(policy));
    GptRun other = RunGpt(policy);
    CHECK(torch::equal(none.loss, other.loss));
    REQUIRE(other.grads.size() == none.grads.size());
    for (const auto& [name, grad] : none.grads) {
      INFO(name);
      REQUIRE(grad.defined());
      REQUIRE(other.grads[name].defined());
      CHECK(torch::equal(grad, other.grads[name]));
    }
    CHECK(other.held_bytes < none.held_bytes);
  }
  // Selective keeps the linear layers' activations, full only the blocks' inputs.
  CHECK(RunGpt(ct::RecomputePolicy::kFull).held_bytes < RunGpt(ct::RecomputePolicy::kSelective).held_bytes);
}

TEST_CASE("RecomputePolicy: parse, name and per-block decision") {
  for (const char* name : {"none", "full", "selective"}) {
    auto parsed = ct::ParseRecomputePolicy(name);
    REQUIRE(parsed.ok());
    CHECK(std::string(ct::RecomputePolicyName(*parsed)) == name);
  }
  auto bad = ct::ParseRecomputePolicy("some");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "--recompute 'some': unknown (use none, full or selective)");
  CHECK(ct::RecomputeForBlock(ct::RecomputePolicy::kNone) == ct::BlockRecompute{});
  CHECK(ct::RecomputeForBlock(ct::RecomputePolicy::kFull) == ct::BlockRecompute{.whole = true});
  CHECK(ct::RecomputeForBlock(ct::RecomputePolicy::kSelective) == ct::BlockRecompute{.attention_core = true});
}
