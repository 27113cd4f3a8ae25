// Top-k compression (DGC): the pure parts of TopkBucket (selection,
// residual accumulation, momentum correction and masking, clipping, the
// message format, the sum of the world's messages), and DDP's kTopk path
// against a fake communicator whose ranks all hold the same tensors.
// Convergence on 4 real ranks is in topk_convergence_test.py.

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include "tests/trainer/catch_after_torch.h"
#include "tests/trainer/done_work.h"
#include <set>
#include <vector>

#include "trainer/parallel/ddp.h"
#include "trainer/parallel/topk_compression.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::DoneWork;

namespace {

at::Tensor Floats(std::vector<float> values) { return at::tensor(values, at::kFloat); }

std::vector<float> ToVector(const at::Tensor& t) {
  at::Tensor c = t.contiguous().to(at::kFloat);
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// The message's values and indices (one rank's).
std::pair<std::vector<float>, std::vector<int>> Unpack(const at::Tensor& message, int64_t k) {
  at::Tensor values = message.narrow(0, 0, k).contiguous().view(at::kFloat);
  at::Tensor indices = message.narrow(0, k, k).contiguous();
  return {ToVector(values), std::vector<int>(indices.data_ptr<int>(), indices.data_ptr<int>() + k)};
}

ct::TopkOptions Options(double density, double momentum, bool error_feedback = true) {
  ct::TopkOptions options;
  options.density = density;
  options.momentum = momentum;
  options.error_feedback = error_feedback;
  return options;
}

// One slot of `numel` entries.
ct::TopkBucket OneSlot(int64_t numel, ct::TopkOptions options) {
  return ct::TopkBucket({0}, {numel}, numel, at::TensorOptions(), options);
}

}  // namespace

TEST_CASE("TopkCount rounds up, sends at least one and at most all") {
  CHECK(ct::TopkCount(1000, 0.01) == 10);
  CHECK(ct::TopkCount(1001, 0.01) == 11);
  CHECK(ct::TopkCount(10, 0.01) == 1);
  CHECK(ct::TopkCount(5, 1.0) == 5);
  CHECK(ct::TopkCount(100, 0.25) == 25);
}

TEST_CASE("SelectTopk picks the largest magnitudes, either sign") {
  at::Tensor picked = ct::SelectTopk(Floats({0.1f, -5, 3, 0.2f, -4}), 2);
  std::vector<int64_t> got(picked.data_ptr<int64_t>(), picked.data_ptr<int64_t>() + picked.numel());
  CHECK(std::set<int64_t>(got.begin(), got.end()) == std::set<int64_t>{1, 4});
}

TEST_CASE("CheckTopkOptions refuses a density outside (0, 1], naming the flag") {
  for (double density : {0.0, -0.5, 1.5}) {
    ctrun::Status status = ct::CheckTopkOptions(Options(density, 0.9));
    CHECK(status.IsInvalidArgument());
    CHECK(status.message().find("--grad-compression topk") != std::string::npos);
  }
  CHECK(ct::CheckTopkOptions(Options(1.0, 0.9)).ok());
  CHECK(ct::CheckTopkOptions(Options(0.01, 1.0)).IsInvalidArgument());
}

TEST_CASE("Error feedback keeps what was not sent and sends it once it is large") {
  ct::TopkBucket bucket = OneSlot(4, Options(0.25, 0.0));  // k = 1, no momentum
  REQUIRE(bucket.message_count() == 1);
  at::Tensor grad = Floats({1, 0.6f, 0.2f, -0.1f});
  at::Tensor g = grad.clone();
  auto [values1, indices1] = Unpack(bucket.Compress(g, 1), 1);
  CHECK(indices1 == std::vector<int>{0});
  CHECK(values1 == std::vector<float>{1});
  CHECK(at::allclose(bucket.residual(), Floats({0, 0.6f, 0.2f, -0.1f})));

  g = grad.clone();
  auto [values2, indices2] = Unpack(bucket.Compress(g, 1), 1);
  CHECK(indices2 == std::vector<int>{1});  // 0.6 + 0.6 beats 1
  CHECK(values2[0] == Approx(1.2f));
  CHECK(at::allclose(bucket.residual(), Floats({1, 0, 0.4f, -0.2f})));
}

TEST_CASE("Momentum correction accumulates velocity; masking zeroes what was sent") {
  ct::TopkBucket bucket = OneSlot(4, Options(0.25, 0.5));
  at::Tensor grad = Floats({1, 0.6f, 0.2f, -0.1f});
  at::Tensor g = grad.clone();
  bucket.Compress(g, 1);  // u = v = g; sends entry 0
  CHECK(at::allclose(bucket.momentum(), Floats({0, 0.6f, 0.2f, -0.1f})));
  CHECK(at::allclose(bucket.residual(), Floats({0, 0.6f, 0.2f, -0.1f})));
  g = grad.clone();
  auto [values, indices] = Unpack(bucket.Compress(g, 1), 1);
  // u = 0.5 u + g = [1, 0.9, 0.3, -0.15]; v += u = [1, 1.5, 0.5, -0.25]
  CHECK(indices == std::vector<int>{1});
  CHECK(values[0] == Approx(1.5f));
  CHECK(at::allclose(bucket.momentum(), Floats({1, 0, 0.3f, -0.15f})));
  CHECK(at::allclose(bucket.residual(), Floats({1, 0, 0.5f, -0.25f})));
}

TEST_CASE("Without error feedback the rest is dropped and momentum follows the exchange") {
  ct::TopkBucket bucket = OneSlot(4, Options(0.25, 0.5, /*error_feedback=*/false));
  at::Tensor g = Floats({1, 0.6f, 0.2f, -0.1f});
  at::Tensor message = bucket.Compress(g, 1);
  CHECK(Unpack(message, 1).second == std::vector<int>{0});
  CHECK(at::equal(bucket.residual(), at::zeros({4})));
  at::Tensor out = at::empty({4});
  bucket.Decompress(message, 1, out);
  CHECK(at::allclose(out, Floats({1, 0, 0, 0})));
  g = Floats({1, 0.6f, 0.2f, -0.1f});
  bucket.Decompress(bucket.Compress(g, 1), 1, out);
  CHECK(at::allclose(out, Floats({1.5f, 0, 0, 0})));  // 0.5 * 1 + 1
}

TEST_CASE("Local clipping limits each parameter to clip / sqrt(world)") {
  ct::TopkOptions options = Options(1.0, 0.0);
  options.clip_norm = 2;
  ct::TopkBucket bucket({0, 2}, {2, 2}, 4, at::TensorOptions(), options);
  at::Tensor g = Floats({3, 4, 0.3f, 0.4f});
  bucket.Compress(g, 4);  // limit 1: the first slot (norm 5) is scaled, the second (0.5) kept
  CHECK(at::allclose(g, Floats({0.6f, 0.8f, 0.3f, 0.4f})));
}

TEST_CASE("per_parameter: each slot sends its own top k, as indices into the bucket") {
  ct::TopkOptions options = Options(0.2, 0.0);
  options.per_parameter = true;
  ct::TopkBucket bucket({0, 10}, {10, 3}, 13, at::TensorOptions(), options);
  REQUIRE(bucket.message_count() == 3);  // 2 + 1
  at::Tensor g = at::zeros({13});
  g[7] = 5;
  g[2] = -3;
  g[11] = 0.01;  // small, but the largest of its slot
  auto [values, indices] = Unpack(bucket.Compress(g, 1), 3);
  CHECK(std::set<int>(indices.begin(), indices.end()) == std::set<int>{2, 7, 11});
}

TEST_CASE("By default the top k is chosen over the whole bucket") {
  ct::TopkBucket bucket({0, 10}, {10, 3}, 13, at::TensorOptions(), Options(0.2, 0.0));
  REQUIRE(bucket.message_count() == 3);  // ceil(0.2 * 13)
  at::Tensor g = at::zeros({13});
  g[7] = 5;
  g[2] = -3;
  g[0] = 2;
  g[11] = 0.01;  // the largest of its slot, but not of the bucket
  auto [values, indices] = Unpack(bucket.Compress(g, 1), 3);
  CHECK(std::set<int>(indices.begin(), indices.end()) == std::set<int>{0, 2, 7});
}

TEST_CASE("Decompress sums every rank's pairs and divides by the world size") {
  ct::TopkBucket bucket = OneSlot(4, Options(0.5, 0.0));  // k = 2
  auto message = [](std::vector<float> values, std::vector<int> indices) {
    return at::cat({Floats(values).view(at::kInt), at::tensor(indices, at::kInt)});
  };
  at::Tensor gathered = at::cat({message({1, 2}, {0, 3}), message({3, 4}, {0, 1})});
  at::Tensor out = at::full({4}, 7.0f);
  bucket.Decompress(gathered, 2, out);
  CHECK(at::allclose(out, Floats({2, 2, 0, 1})));
}

TEST_CASE("A dense warm-up step is momentum SGD's buffer") {
  ct::TopkBucket bucket = OneSlot(2, Options(0.5, 0.9));
  at::Tensor mean = Floats({1, 1});
  bucket.DenseStep(mean);
  CHECK(at::allclose(mean, Floats({1, 1})));
  mean = Floats({1, 1});
  bucket.DenseStep(mean);
  CHECK(at::allclose(mean, Floats({1.9f, 1.9f})));
}

namespace {

// `size` ranks that all hold this rank's tensors.
class SameComm : public ct::Communicator {
 public:
  explicit SameComm(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::string backend() const override { return "fake"; }
  c10::intrusive_ptr<c10d::Work> AllReduceSum(at::Tensor& tensor) override {
    ++all_reduces;
    tensor.mul_(size_);
    return c10::make_intrusive<DoneWork>();
  }
  c10::intrusive_ptr<c10d::Work> AllGather(at::Tensor& shard, at::Tensor& full) override {
    ++all_gathers;
    full.copy_(shard.repeat({size_}));
    return c10::make_intrusive<DoneWork>();
  }
  c10::intrusive_ptr<c10d::Work> Broadcast(std::vector<at::Tensor>&, int) override {
    return c10::make_intrusive<DoneWork>();
  }
  c10::intrusive_ptr<c10d::Work> Barrier() override { return c10::make_intrusive<DoneWork>(); }
  int all_reduces = 0, all_gathers = 0;

 private:
  int size_;
};

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(20, 10)); }
  at::Tensor forward(const at::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

at::Tensor NetLoss(Net& net) {
  at::manual_seed(1);
  return net->forward(at::randn({6, 20})).pow(2).mean();
}

ct::DdpOptions TopkDdp(double density, int64_t warmup) {
  ct::DdpOptions options;
  options.compression = ct::GradCompression::kTopk;
  options.topk = Options(density, 0.0);
  options.topk.warmup_steps = warmup;
  return options;
}

}  // namespace

TEST_CASE("DDP top-k: dense warm-up, then all-gathered sparse steps with wire bytes counted") {
  at::manual_seed(0);
  Net net;
  SameComm comm(4);
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, TopkDdp(0.1, 1));
  REQUIRE(ddp.ok());
  const int64_t numel = 210;  // 200 weights + 10 biases
  REQUIRE((*ddp)->Backward(NetLoss(net)).ok());
  CHECK(comm.all_reduces == 1);
  CHECK(comm.all_gathers == 0);
  CHECK((*ddp)->stats().wire_bytes == 4 * numel);
  at::Tensor dense = net->fc->weight.grad().clone();
  at::Tensor bias_dense = net->fc->bias.grad().clone();

  for (auto& p : net->parameters()) p.mutable_grad().zero_();
  REQUIRE((*ddp)->Backward(NetLoss(net)).ok());
  CHECK(comm.all_gathers == 1);
  const int64_t k = 21;  // 10% of the bucket
  CHECK((*ddp)->stats().wire_bytes == 4 * numel + 2 * 4 * k);
  CHECK((*ddp)->stats().dense_bytes == 2 * 4 * numel);
  // Every rank sent the same 21 entries: their mean is the entry, and they
  // are the largest.
  at::Tensor sparse = at::cat({net->fc->weight.grad().reshape({-1}), net->fc->bias.grad()});
  at::Tensor full = at::cat({dense.reshape({-1}), bias_dense});
  at::Tensor kept = sparse.ne(0);
  CHECK(kept.sum().item<int64_t>() == k);
  CHECK(at::allclose(sparse.masked_select(kept), full.masked_select(kept)));
  CHECK(full.abs().masked_select(kept).min().item<float>() >=
        full.abs().masked_select(kept.logical_not()).max().item<float>());
}

TEST_CASE("DDP top-k at density 1 equals plain averaging") {
  at::manual_seed(0);
  Net net;
  SameComm comm(2);
  auto ddp = ct::DistributedDataParallel::Create(*net, comm, TopkDdp(1.0, 0));
  REQUIRE(ddp.ok());
  Net plain;
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < plain->parameters().size(); ++i) plain->parameters()[i].copy_(net->parameters()[i]);
  }
  REQUIRE((*ddp)->Backward(NetLoss(net)).ok());
  NetLoss(plain).backward();
  CHECK(comm.all_gathers == 1);
  for (size_t i = 0; i < plain->parameters().size(); ++i) {
    CHECK(at::allclose(net->parameters()[i].grad(), plain->parameters()[i].grad()));
  }
}

TEST_CASE("DDP top-k refuses a bad density and non-float32 parameters") {
  Net net;
  SameComm comm(2);
  auto bad = ct::DistributedDataParallel::Create(*net, comm, TopkDdp(0.0, 0));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().IsInvalidArgument());
  net->to(at::kDouble);
  auto wrong_type = ct::DistributedDataParallel::Create(*net, comm, TopkDdp(0.01, 0));
  REQUIRE_FALSE(wrong_type.ok());
  CHECK(wrong_type.status().message().find("float32") != std::string::npos);
}
