// ctrun-gpt's --precision and --cpu-offload: the flags' refusals, and
// GptPrecision's step on the CPU (the scaler's skip and backoff with an
// injected inf, the loss scaling, the autocast stage, optimizer offload).

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/optim/sgd.h>
#include "tests/trainer/catch_after_torch.h"

#include <limits>

#include "tests/trainer/apps/gpt_refusal.h"
#include "trainer/apps/gpt_flags.h"
#include "trainer/apps/gpt_precision.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::Refusal;

namespace {

bool AutocastOn(c10::DispatchKey key) { return !c10::impl::tls_is_dispatch_key_excluded(key); }

// A one-matmul stage that records the dtype autocast gave its product.
class MatmulStage : public ct::PipelineStage {
 public:
  at::Tensor Forward(const at::Tensor& input) override {
    at::Tensor out = at::mm(input, weight);
    inner_dtype = out.scalar_type();
    return out;
  }
  at::Tensor Loss(const at::Tensor& output, const at::Tensor&) const override { return output.sum(); }
  std::vector<int64_t> ActivationShape(int64_t batch) const override { return {batch, 2}; }
  bool first() const override { return true; }
  bool last() const override { return true; }

  at::Tensor weight = at::ones({2, 2}).requires_grad_();
  at::ScalarType inner_dtype = at::kFloat;
};

std::unique_ptr<ct::GptPrecision> Make(bool fp16, ct::CpuOffload offload = ct::CpuOffload::kNone) {
  auto made = ct::GptPrecision::Create({.fp16 = fp16, .offload = offload, .device = at::kCPU, .world = nullptr});
  REQUIRE(made.ok());
  return std::move(*made);
}

}  // namespace

TEST_CASE("ParseGptFlags: --precision and --cpu-offload default to fp32 and none, and parse") {
  auto flags = ct::ParseGptFlags({});
  REQUIRE(flags.ok());
  CHECK(flags->precision == "fp32");
  CHECK(flags->cpu_offload == "none");
  auto fp16 = ct::ParseGptFlags({"--precision", "fp16", "--backend", "nccl", "--mesh", "pp=2"});
  REQUIRE(fp16.ok());
  CHECK(fp16->precision == "fp16");
  for (const char* mode : {"params", "optimizer"}) {
    auto offload = ct::ParseGptFlags({"--strategy", "fsdp", "--cpu-offload", mode, "--backend", "nccl"});
    REQUIRE(offload.ok());
    CHECK(offload->cpu_offload == mode);
  }
}

TEST_CASE("ParseGptFlags: --precision and --cpu-offload refusals are one line naming the flag and the fix") {
  CHECK(Refusal({"--precision", "bf16"}) == "--precision 'bf16': unknown (use fp32 or fp16)");
  CHECK(Refusal({"--cpu-offload", "disk"}) == "--cpu-offload 'disk': unknown (use none, params or optimizer)");
  CHECK(Refusal({"--precision", "fp16"}) ==
        "--precision fp16 with --backend gloo: the CPU has no float16 matmul in this torch; use --backend nccl "
        "on a GPU, or --precision fp32");
  CHECK(Refusal({"--precision", "fp16", "--backend", "nccl", "--recompute", "full"}) ==
        "--precision fp16 with --recompute full: not supported yet (the recomputation runs outside autocast); "
        "use --recompute none or --precision fp32");
  CHECK(Refusal({"--cpu-offload", "params", "--backend", "nccl"}) ==
        "--cpu-offload params with --strategy ddp: offload is FSDP's; use --strategy fsdp");
  CHECK(Refusal({"--strategy", "fsdp", "--cpu-offload", "optimizer"}) ==
        "--cpu-offload optimizer with --backend gloo: the parameters already live in CPU memory; use --backend "
        "nccl on a GPU");
}

TEST_CASE("GptPrecision fp32: no scaling, the plain optimizer step") {
  auto precision = Make(false);
  at::Tensor loss = at::tensor(2.5f);
  CHECK(precision->ScaleLoss(loss).data_ptr() == loss.data_ptr());
  CHECK(precision->UnscaleLoss(2.5) == 2.5);
  MatmulStage stage;
  CHECK(precision->Stages({&stage}) == std::vector<ct::PipelineStage*>{&stage});
  CHECK(precision->scaler() == nullptr);
  at::Tensor w = at::ones({2}).requires_grad_();
  torch::optim::SGD sgd(std::vector<at::Tensor>{w}, torch::optim::SGDOptions(1.0));
  w.mutable_grad() = at::ones({2});
  REQUIRE(precision->Step(sgd).ok());
  CHECK(at::equal(w.detach(), at::zeros({2})));
  CHECK(precision->skipped_steps() == 0);
}

TEST_CASE("GptPrecision fp16: an inf gradient skips the step and halves the scale; clean steps unscale") {
  auto precision = Make(true);
  REQUIRE(precision->scaler() != nullptr);
  CHECK(precision->ScaleLoss(at::tensor(2.0f)).item<float>() == 131072.0f);
  CHECK(precision->UnscaleLoss(131072.0) == 2.0);
  at::Tensor w = at::ones({2}).requires_grad_();
  torch::optim::SGD sgd(std::vector<at::Tensor>{w}, torch::optim::SGDOptions(1.0));
  w.mutable_grad() = at::tensor({1.0f, std::numeric_limits<float>::infinity()});
  REQUIRE(precision->Step(sgd).ok());
  CHECK(at::equal(w.detach(), at::ones({2})));
  CHECK(precision->skipped_steps() == 1);
  CHECK(precision->scaler()->scale() == 32768.0);
  w.mutable_grad() = at::full({2}, 32768.0f);  // a gradient of 1, scaled
  REQUIRE(precision->Step(sgd).ok());
  CHECK(at::equal(w.detach(), at::zeros({2})));
  CHECK(precision->skipped_steps() == 1);
}

TEST_CASE("GptPrecision fp16: the stage runs under autocast, returns float32 and scales its loss") {
  auto precision = Make(true);
  MatmulStage stage;
  std::vector<ct::PipelineStage*> wrapped = precision->Stages({&stage});
  REQUIRE(wrapped.size() == 1);
  REQUIRE(wrapped[0] != &stage);
  CHECK(wrapped[0]->first());
  CHECK(wrapped[0]->last());
  CHECK(wrapped[0]->ActivationShape(3) == std::vector<int64_t>{3, 2});
  at::Tensor out = wrapped[0]->Forward(at::ones({1, 2}));
  // The CPU's autocast dtype is bfloat16 (CUDA's is float16).
  CHECK(stage.inner_dtype == at::kBFloat16);
  CHECK(out.scalar_type() == at::kFloat);
  CHECK(!AutocastOn(c10::DispatchKey::AutocastCPU));
  at::Tensor loss = wrapped[0]->Loss(out, at::Tensor());
  CHECK(loss.item<float>() == 4.0f * 65536.0f);
  loss.backward();
  CHECK(stage.weight.grad().scalar_type() == at::kFloat);
  CHECK(stage.weight.grad().sum().item<float>() == 4.0f * 65536.0f);
}

TEST_CASE("AutocastGuard: on while alive, then the previous state; disabled does nothing") {
  CHECK(!AutocastOn(c10::DispatchKey::AutocastCPU));
  {
    ct::AutocastGuard off(at::kCPU, false);
    CHECK(!AutocastOn(c10::DispatchKey::AutocastCPU));
  }
  {
    ct::AutocastGuard on(at::kCPU, true);
    CHECK(AutocastOn(c10::DispatchKey::AutocastCPU));
    CHECK(!AutocastOn(c10::DispatchKey::AutocastCUDA));
  }
  CHECK(!AutocastOn(c10::DispatchKey::AutocastCPU));
}

TEST_CASE("GptPrecision --cpu-offload optimizer: the optimizer steps host copies, pushed back to the parameters") {
  auto precision = Make(false, ct::CpuOffload::kOptimizer);
  at::Tensor w = at::ones({2}).requires_grad_();
  std::vector<at::Tensor> params = precision->OptimizerParams({w});
  REQUIRE(params.size() == 1);
  CHECK(params[0].data_ptr() != w.data_ptr());
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.5));
  w.mutable_grad() = at::ones({2});
  REQUIRE(precision->Step(sgd).ok());
  CHECK(at::equal(w.detach(), at::full({2}, 0.5f)));
  CHECK(at::equal(params[0].detach(), at::full({2}, 0.5f)));
}
