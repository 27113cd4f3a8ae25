// CPU offload for FSDP (cpu_offload.h), run with the CPU as the "device":
// where the shards, gradients and optimizer state live, and that training
// with --cpu-offload params or optimizer is bitwise the same as without,
// on one rank (a fake one-rank communicator).

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include "tests/trainer/catch_after_torch.h"
#include "tests/trainer/done_work.h"

#include <memory>
#include <stdexcept>
#include <vector>

#include "trainer/parallel/cpu_offload.h"
#include "trainer/parallel/fsdp.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::DoneWork;

namespace {

// A world of one rank: every collective is the identity.
class SoloComm : public ct::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "fake"; }
  c10::intrusive_ptr<c10d::Work> AllReduceSum(at::Tensor&) override { return c10::make_intrusive<DoneWork>(); }
  c10::intrusive_ptr<c10d::Work> Broadcast(std::vector<at::Tensor>&, int) override {
    return c10::make_intrusive<DoneWork>();
  }
  c10::intrusive_ptr<c10d::Work> Barrier() override { throw std::logic_error("unexpected barrier"); }
};

struct OffloadNet : torch::nn::Module {
  OffloadNet() {
    torch::manual_seed(7);
    a = register_module("a", torch::nn::Linear(4, 8));
    b = register_module("b", torch::nn::Linear(8, 3));
  }
  torch::nn::Linear a{nullptr}, b{nullptr};
};

std::vector<ct::FsdpStage> Stages(OffloadNet& net) {
  return {{net.a.ptr(), [&net](const at::Tensor& x) { return net.a(x).relu(); }},
          {net.b.ptr(), [&net](const at::Tensor& x) { return net.b(x); }}};
}

std::unique_ptr<ct::FullyShardedDataParallel> Wrap(OffloadNet& net, ct::Communicator& comm, bool offload_params) {
  ct::FsdpOptions options;
  options.min_unit_params = 1;  // a unit per layer
  options.offload_params = offload_params;
  auto fsdp = ct::FullyShardedDataParallel::Create(net, Stages(net), comm, options);
  REQUIRE(fsdp.ok());
  return std::move(*fsdp);
}

// Three Adam steps on fixed data; returns the shards' values.
std::vector<at::Tensor> Train(ct::FullyShardedDataParallel& fsdp, torch::optim::Optimizer& optimizer,
                              ct::OptimizerOffload* offload) {
  torch::manual_seed(3);
  at::Tensor x = at::randn({5, 4});
  at::Tensor y = at::randn({5, 3});
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    auto out = fsdp.Forward(x);
    REQUIRE(out.ok());
    REQUIRE(fsdp.Backward((*out - y).pow(2).mean()).ok());
    if (offload != nullptr) offload->PullGrads();
    optimizer.step();
    if (offload != nullptr) offload->PushParams();
  }
  std::vector<at::Tensor> out;
  for (const auto& shard : fsdp.parameters()) out.push_back(shard.detach().clone());
  return out;
}

bool AllEqual(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

std::vector<at::Tensor> Baseline() {
  SoloComm comm;
  OffloadNet net;
  auto fsdp = Wrap(net, comm, false);
  torch::optim::Adam adam(fsdp->parameters(), torch::optim::AdamOptions(0.01));
  return Train(*fsdp, adam, nullptr);
}

}  // namespace

TEST_CASE("CpuOffload: names parse both ways; an unknown one is refused naming it") {
  for (auto mode : {ct::CpuOffload::kNone, ct::CpuOffload::kParams, ct::CpuOffload::kOptimizer}) {
    auto parsed = ct::ParseCpuOffload(ct::CpuOffloadName(mode));
    REQUIRE(parsed.ok());
    CHECK(*parsed == mode);
  }
  auto bad = ct::ParseCpuOffload("gpu");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "--cpu-offload 'gpu': unknown (use none, params or optimizer)");
}

TEST_CASE("CpuOffload: the helpers copy only across devices or dtypes") {
  at::Tensor t = at::arange(6, at::kFloat);
  at::Tensor host = ct::ToHost(t, false);
  CHECK(host.data_ptr() != t.data_ptr());
  CHECK(at::equal(host, t));
  CHECK(!host.is_pinned());
  CHECK(ct::ShardOnDevice(t, at::kCPU, at::kFloat).data_ptr() == t.data_ptr());
  at::Tensor half = ct::ShardOnDevice(t, at::kCPU, at::kBFloat16);
  CHECK(half.scalar_type() == at::kBFloat16);
  CHECK(at::equal(half.to(at::kFloat), t));
  CHECK(ct::GradLike(t, host).data_ptr() == t.data_ptr());
}

TEST_CASE("CpuOffload params: shards, gradients and optimizer state on the host; bitwise the same training") {
  SoloComm comm;
  OffloadNet net;
  auto fsdp = Wrap(net, comm, true);
  torch::optim::Adam adam(fsdp->parameters(), torch::optim::AdamOptions(0.01));
  std::vector<at::Tensor> trained = Train(*fsdp, adam, nullptr);
  CHECK(AllEqual(trained, Baseline()));
  for (const auto& shard : fsdp->parameters()) {
    CHECK(shard.device().is_cpu());
    REQUIRE(shard.grad().defined());
    CHECK(shard.grad().device().is_cpu());
    CHECK(shard.requires_grad());
  }
  REQUIRE(adam.state().size() == fsdp->parameters().size());
  for (const auto& [key, state] : adam.state()) {
    auto& adam_state = static_cast<torch::optim::AdamParamState&>(*state);
    CHECK(adam_state.exp_avg().device().is_cpu());
    CHECK(adam_state.exp_avg_sq().device().is_cpu());
  }
}

TEST_CASE("CpuOffload params: no_shard is refused") {
  SoloComm comm;
  OffloadNet net;
  ct::FsdpOptions options;
  options.strategy = ct::ShardingStrategy::kNoShard;
  options.offload_params = true;
  auto fsdp = ct::FullyShardedDataParallel::Create(net, Stages(net), comm, options);
  REQUIRE(!fsdp.ok());
  CHECK(fsdp.status().message() ==
        "FSDP: CPU offload of parameters needs a sharded strategy (full_shard or shard_grad_op), not no_shard");
}

TEST_CASE("CpuOffload optimizer: the optimizer steps host copies; bitwise the same training") {
  SoloComm comm;
  OffloadNet net;
  auto fsdp = Wrap(net, comm, false);
  ct::OptimizerOffload offload(fsdp->parameters());
  const auto& host = offload.host_params();
  REQUIRE(host.size() == fsdp->parameters().size());
  for (size_t i = 0; i < host.size(); ++i) {
    CHECK(host[i].data_ptr() != fsdp->parameters()[i].data_ptr());
    CHECK(host[i].requires_grad());
  }
  torch::optim::Adam adam(host, torch::optim::AdamOptions(0.01));
  std::vector<at::Tensor> trained = Train(*fsdp, adam, &offload);
  CHECK(AllEqual(trained, Baseline()));
  // The optimizer holds the host copies, which hold what was pushed.
  REQUIRE(adam.state().size() == host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    CHECK(adam.param_groups()[0].params()[i].data_ptr() == host[i].data_ptr());
    CHECK(at::equal(host[i].detach(), trained[i]));
    REQUIRE(host[i].grad().defined());
  }
}
