// DistributedDataParallel against a fake in-process Communicator: bucket
// layout, launch during backward, in-order launches, averaging, NoSync,
// unused parameters and failures. Multi-process equivalence with real Gloo
// is in ddp_equivalence_test.py.

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/module.h>
#include <torch/optim/sgd.h>
#include "tests/trainer/catch_after_torch.h"
#include "tests/trainer/done_work.h"
#include <functional>
#include <stdexcept>

#include "trainer/parallel/ddp.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::DoneWork;

namespace {

// Plays `size` ranks that all hold this rank's tensor: the sum is size * x.
class FakeComm : public ct::Communicator {
 public:
  explicit FakeComm(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::string backend() const override { return "fake"; }
  c10::intrusive_ptr<c10d::Work> AllReduceSum(at::Tensor& tensor) override {
    if (on_launch) on_launch(tensor);
    launched_numel.push_back(tensor.numel());
    launched_dtype.push_back(tensor.scalar_type());
    tensor.mul_(size_);
    return c10::make_intrusive<DoneWork>(fail_next);
  }
  c10::intrusive_ptr<c10d::Work> Broadcast(std::vector<at::Tensor>&, int) override {
    ++broadcasts;
    return c10::make_intrusive<DoneWork>(false);
  }
  c10::intrusive_ptr<c10d::Work> Barrier() override { return c10::make_intrusive<DoneWork>(false); }

  std::function<void(const at::Tensor&)> on_launch;
  std::vector<int64_t> launched_numel;
  std::vector<at::ScalarType> launched_dtype;
  int broadcasts = 0;
  bool fail_next = false;

 private:
  int size_;
};

// Three linears in a chain: 4->8->8->2; an optional fourth is never used.
struct ChainImpl : torch::nn::Module {
  explicit ChainImpl(bool with_unused = false) {
    a = register_module("a", torch::nn::Linear(4, 8));
    b = register_module("b", torch::nn::Linear(8, 8));
    c = register_module("c", torch::nn::Linear(8, 2));
    if (with_unused) unused = register_module("unused", torch::nn::Linear(2, 2));
  }
  at::Tensor forward(const at::Tensor& x) { return c->forward(at::relu(b->forward(at::relu(a->forward(x))))); }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr}, unused{nullptr};
};
TORCH_MODULE(Chain);

// A 64-byte cap: a bucket closes once it holds >= 64 bytes, so each of a, b,
// c (bias 8-32 bytes, then weight 64-256 bytes) closes its own bucket.
ct::DdpOptions PerLayer() {
  ct::DdpOptions options;
  options.bucket_cap_mb = 64.0 / (1024 * 1024);
  options.first_bucket_cap_mb = options.bucket_cap_mb;
  return options;
}

at::Tensor Loss(Chain& net) {
  at::manual_seed(1);
  return net->forward(at::randn({5, 4})).pow(2).mean();
}

// A fresh Chain with `net`'s weights: the single-process reference a DDP
// run is checked against.
Chain CopyOf(Chain& net) {
  Chain copy;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < net->parameters().size(); ++i) copy->parameters()[i].copy_(net->parameters()[i]);
  return copy;
}

}  // namespace

TEST_CASE("DDP buckets parameters in reverse registration order") {
  at::manual_seed(0);
  Chain net;
  FakeComm comm(2);
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, PerLayer());
  REQUIRE(ddp.ok());
  // Registration: a.weight 0, a.bias 1, b.weight 2, b.bias 3, c.weight 4, c.bias 5.
  CHECK((*ddp)->BucketLayout() ==
        std::vector<std::vector<size_t>>{{5, 4}, {3, 2}, {1, 0}});
  CHECK(comm.broadcasts >= 1);  // parameters came from rank 0

  auto one_bucket = ct::DistributedDataParallel::Create(*net, comm, {});
  REQUIRE(one_bucket.ok());
  CHECK((*one_bucket)->BucketLayout().size() == 1);
}

TEST_CASE("DDP launches each bucket during backward, in order, and averages") {
  at::manual_seed(0);
  Chain net;
  Chain plain = CopyOf(net);
  FakeComm comm(4);
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, PerLayer());
  REQUIRE(ddp.ok());
  std::vector<bool> first_layer_done_at_launch;
  comm.on_launch = [&](const at::Tensor&) {
    first_layer_done_at_launch.push_back(net->a->weight.grad().defined());
  };
  REQUIRE((*ddp)->Backward(Loss(net)).ok());
  CHECK(comm.launched_numel == std::vector<int64_t>{18, 72, 40});  // c, b, a
  // The last layer's bucket left while layer a's gradient was still to come.
  CHECK(first_layer_done_at_launch == std::vector<bool>{false, false, true});

  Loss(plain).backward();
  for (size_t i = 0; i < plain->parameters().size(); ++i) {
    CHECK(at::allclose(net->parameters()[i].grad(), plain->parameters()[i].grad()));
  }
  CHECK((*ddp)->stats().synced_steps == 1);
}

// Whether `grad`'s memory lies inside one of `buckets`.
static bool InBucket(const at::Tensor& grad, const std::vector<at::Tensor>& buckets) {
  const auto* p = static_cast<const char*>(grad.data_ptr());
  for (const auto& b : buckets) {
    const auto* begin = static_cast<const char*>(b.data_ptr());
    if (p >= begin && p + grad.nbytes() <= begin + b.nbytes()) return true;
  }
  return false;
}

TEST_CASE("DDP keeps gradients in its buckets: no copy in or out after the first step") {
  at::manual_seed(0);
  Chain net;
  Chain plain = CopyOf(net);
  FakeComm comm(4);
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, PerLayer());
  REQUIRE(ddp.ok());
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD plain_opt(plain->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const std::vector<at::Tensor> buckets = (*ddp)->Buckets();
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    plain_opt.zero_grad();
    Loss(net).backward();
    if (step > 0) {
      // zero_grad zeroed the bucket views in place and backward added into them.
      for (const auto& p : net->parameters()) CHECK(InBucket(p.grad(), buckets));
    }
    REQUIRE((*ddp)->FinishGradSync().ok());
    for (const auto& p : net->parameters()) CHECK(InBucket(p.grad(), buckets));
    Loss(plain).backward();
    for (size_t i = 0; i < plain->parameters().size(); ++i) {
      CHECK(at::allclose(net->parameters()[i].grad(), plain->parameters()[i].grad()));
    }
    opt.step();
    plain_opt.step();
  }
  for (size_t i = 0; i < plain->parameters().size(); ++i) {
    CHECK(at::allclose(net->parameters()[i], plain->parameters()[i]));
  }
  // A .grad the caller replaces is copied in, then swapped for the bucket's.
  net->a->weight.mutable_grad() = at::Tensor();
  REQUIRE((*ddp)->Backward(Loss(net)).ok());
  CHECK(InBucket(net->a->weight.grad(), buckets));
}

TEST_CASE("DDP NoSync accumulates locally and syncs the sum next time") {
  at::manual_seed(0);
  Chain net;
  FakeComm comm(2);
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, PerLayer());
  REQUIRE(ddp.ok());
  {
    ct::DistributedDataParallel::NoSync no_sync(**ddp);
    REQUIRE((*ddp)->Backward(Loss(net)).ok());
  }
  CHECK(comm.launched_numel.empty());
  const at::Tensor once = net->c->bias.grad().clone();
  REQUIRE((*ddp)->Backward(Loss(net)).ok());
  CHECK(comm.launched_numel.size() == 3);
  CHECK(at::allclose(net->c->bias.grad(), 2 * once));
}

TEST_CASE("DDP all-reduces unused parameters as zeros, in bucket order") {
  at::manual_seed(0);
  Chain net(/*with_unused=*/true);
  FakeComm comm(2);
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, PerLayer());
  REQUIRE(ddp.ok());
  // The unused layer (24 bytes) shares the first bucket with c.
  REQUIRE((*ddp)->BucketLayout().front() == std::vector<size_t>{7, 6, 5, 4});
  REQUIRE((*ddp)->Backward(Loss(net)).ok());
  CHECK(comm.launched_numel == std::vector<int64_t>{24, 72, 40});
  REQUIRE(net->unused->weight.grad().defined());
  CHECK(net->unused->weight.grad().abs().sum().item<double>() == 0.0);
}

TEST_CASE("DDP: fp16 compression sends half precision") {
  at::manual_seed(0);
  Chain net;
  FakeComm comm(2);
  ct::DdpOptions options;
  options.compression = ct::GradCompression::kFp16;
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, options);
  REQUIRE(ddp.ok());
  REQUIRE((*ddp)->Backward(Loss(net)).ok());
  CHECK(comm.launched_dtype == std::vector<at::ScalarType>{at::kHalf});
  CHECK(net->a->weight.grad().scalar_type() == at::kFloat);
}

TEST_CASE("DDP reports a failed all-reduce and a second backward as one line") {
  at::manual_seed(0);
  Chain net;
  FakeComm comm(2);
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, PerLayer());
  REQUIRE(ddp.ok());

  comm.fail_next = true;
  ctrun::Status failed = (*ddp)->Backward(Loss(net));
  CHECK(failed.IsUnavailable());
  CHECK(failed.message().find("Connection closed by peer") != std::string::npos);
  CHECK(failed.message().find('\n') == std::string::npos);
  comm.fail_next = false;

  Loss(net).backward();
  Loss(net).backward();  // without FinishGradSync in between
  ctrun::Status misuse = (*ddp)->FinishGradSync();
  CHECK(misuse.code() == ctrun::Status::Code::kFailedPrecondition);
  CHECK(misuse.message().find("NoSync") != std::string::npos);
  CHECK((*ddp)->Backward(Loss(net)).ok());  // and it recovers
}

TEST_CASE("DDP rejects a non-positive bucket cap") {
  Chain net;
  FakeComm comm(1);
  ct::DdpOptions options;
  options.bucket_cap_mb = 0;
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, options);
  REQUIRE_FALSE(ddp.ok());
  CHECK(ddp.status().message().find("--bucket-cap-mb") != std::string::npos);
}
