// GradScaler (dynamic loss scaling): skipping on inf/NaN agreed over two
// ranks (threads sharing an in-process fake group), growth and backoff of
// the scale, exact unscaling, state round trip, call-order and argument
// errors.

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>
#include "tests/trainer/catch_after_torch.h"
#include "tests/trainer/done_work.h"
#include <condition_variable>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "trainer/parallel/grad_scaler.h"

namespace ct = ctrun::trainer;
using ctrun::trainer::testing::DoneWork;

namespace {

// Ranks played by threads of one process: Sum blocks until every rank has
// contributed, then each gets the total.
class Group {
 public:
  explicit Group(int size) : size_(size) {}
  at::Tensor Sum(const at::Tensor& tensor) {
    std::unique_lock<std::mutex> lock(mu_);
    int64_t generation = generation_;
    sum_ = arrived_ == 0 ? tensor.clone() : sum_ + tensor;
    if (++arrived_ == size_) {
      total_ = sum_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
    return total_;
  }

 private:
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  at::Tensor sum_, total_;
};

// One rank of a Group; records each all-reduce's shape and dtype.
class GroupComm : public ct::Communicator {
 public:
  GroupComm(Group& group, int rank, int size) : group_(group), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "fake"; }
  c10::intrusive_ptr<c10d::Work> AllReduceSum(at::Tensor& tensor) override {
    numel.push_back(tensor.numel());
    dtype.push_back(tensor.scalar_type());
    tensor.copy_(group_.Sum(tensor));
    return c10::make_intrusive<DoneWork>();
  }
  c10::intrusive_ptr<c10d::Work> Broadcast(std::vector<at::Tensor>&, int) override {
    throw std::logic_error("unexpected broadcast");
  }
  c10::intrusive_ptr<c10d::Work> Barrier() override { throw std::logic_error("unexpected barrier"); }

  std::vector<int64_t> numel;
  std::vector<at::ScalarType> dtype;

 private:
  Group& group_;
  int rank_, size_;
};

// One parameter [1, 2, 3] under SGD with momentum (a step creates state).
struct Model {
  Model() : w(at::tensor({1.0f, 2.0f, 3.0f}).requires_grad_()),
            sgd(std::vector<at::Tensor>{w}, torch::optim::SGDOptions(0.1).momentum(0.9)) {}
  // Sets w's gradient to `grad` times the scaler's scale, as a scaled
  // backward would.
  void SetScaledGrad(const ct::GradScaler& scaler, at::Tensor grad) {
    w.mutable_grad() = grad.mul(scaler.scale());
  }
  at::Tensor w;
  torch::optim::SGD sgd;
};

ct::GradScaler MakeScaler(ct::Communicator* comm = nullptr, ct::GradScalerOptions options = {}) {
  auto scaler = ct::GradScaler::Create(options, comm);
  REQUIRE(scaler.ok());
  return std::move(scaler).value();
}

// One clean step (gradient 1) and its update.
void CleanStep(ct::GradScaler& scaler, Model& model) {
  model.SetScaledGrad(scaler, at::ones({3}));
  REQUIRE(scaler.Step(model.sgd).value());
  REQUIRE(scaler.Update().ok());
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// What a rank saw in the two-rank test.
struct RankResult {
  bool stepped_bad = true, stepped_clean = false;
  bool params_unchanged = false, state_empty = false, params_moved = false;
  double scale_after_bad = 0, scale_after_clean = 0;
  int64_t skipped = -1;
  std::vector<int64_t> numel;
  std::vector<at::ScalarType> dtype;
};

void RunRank(Group& group, int rank, float bad_value, RankResult& out) {
  GroupComm comm(group, rank, 2);
  ct::GradScaler scaler = MakeScaler(&comm);
  Model model;
  at::Tensor before = model.w.detach().clone();
  // Only rank 1's gradient holds the bad value.
  model.SetScaledGrad(scaler, rank == 1 ? at::tensor({1.0f, bad_value, 1.0f}) : at::ones({3}));
  auto stepped = scaler.Step(model.sgd);
  if (!stepped.ok() || !scaler.Update().ok()) return;
  out.stepped_bad = *stepped;
  out.params_unchanged = at::equal(model.w.detach(), before);
  out.state_empty = model.sgd.state().empty();
  out.scale_after_bad = scaler.scale();
  model.SetScaledGrad(scaler, at::ones({3}));
  stepped = scaler.Step(model.sgd);
  if (!stepped.ok() || !scaler.Update().ok()) return;
  out.stepped_clean = *stepped;
  out.params_moved = !at::equal(model.w.detach(), before);
  out.scale_after_clean = scaler.scale();
  out.skipped = scaler.skipped_steps();
  out.numel = comm.numel;
  out.dtype = comm.dtype;
}

}  // namespace

TEST_CASE("GradScaler: an inf or NaN on one rank skips the step on every rank and halves the scale") {
  for (float bad : {kInf, -kInf, kNan}) {
    CAPTURE(bad);
    Group group(2);
    RankResult results[2];
    std::thread peer([&] { RunRank(group, 1, bad, results[1]); });
    RunRank(group, 0, bad, results[0]);
    peer.join();
    for (const RankResult& r : results) {
      CHECK_FALSE(r.stepped_bad);
      CHECK(r.params_unchanged);
      CHECK(r.state_empty);  // the optimizer never stepped
      CHECK(r.scale_after_bad == 32768.0);
      CHECK(r.stepped_clean);
      CHECK(r.params_moved);
      CHECK(r.scale_after_clean == 32768.0);  // one clean step: no growth yet
      CHECK(r.skipped == 1);
      // One all-reduce per step, of one float32 element.
      CHECK(r.numel == std::vector<int64_t>{1, 1});
      CHECK(r.dtype == std::vector<at::ScalarType>{at::kFloat, at::kFloat});
    }
  }
}

TEST_CASE("GradScaler: without a communicator an inf or NaN skips the step") {
  for (float bad : {kInf, kNan}) {
    ct::GradScaler scaler = MakeScaler();
    Model model;
    at::Tensor before = model.w.detach().clone();
    model.SetScaledGrad(scaler, at::tensor({bad, 0.0f, 0.0f}));
    REQUIRE_FALSE(scaler.Step(model.sgd).value());
    REQUIRE(scaler.Update().ok());
    CHECK(at::equal(model.w.detach(), before));
    CHECK(model.sgd.state().empty());
    CHECK(scaler.scale() == 32768.0);
    CHECK(scaler.growth_tracker() == 0);
    CHECK(scaler.skipped_steps() == 1);
  }
}

TEST_CASE("GradScaler: an inf resets the growth tracker") {
  ct::GradScaler scaler = MakeScaler();
  Model model;
  for (int i = 0; i < 5; ++i) CleanStep(scaler, model);
  CHECK(scaler.growth_tracker() == 5);
  model.SetScaledGrad(scaler, at::full({3}, kInf));
  REQUIRE_FALSE(scaler.Step(model.sgd).value());
  REQUIRE(scaler.Update().ok());
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.scale() == 32768.0);
}

TEST_CASE("GradScaler: 2000 clean steps double the scale, 1999 do not") {
  ct::GradScaler scaler = MakeScaler();
  Model model;
  for (int i = 0; i < 1999; ++i) CleanStep(scaler, model);
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.growth_tracker() == 1999);
  CleanStep(scaler, model);
  CHECK(scaler.scale() == 131072.0);
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.skipped_steps() == 0);
}

TEST_CASE("GradScaler: growth that would overflow float32 keeps the scale") {
  ct::GradScalerOptions options;
  options.init_scale = 0x1p127;
  options.growth_interval = 1;
  ct::GradScaler scaler = MakeScaler(nullptr, options);
  Model model;
  model.w.mutable_grad() = at::ones({3});
  REQUIRE(scaler.Step(model.sgd).ok());
  REQUIRE(scaler.Update().ok());
  CHECK(scaler.scale() == 0x1p127);
  CHECK(scaler.growth_tracker() == 0);
}

TEST_CASE("GradScaler: Scale multiplies the loss, Unscale divides the gradients exactly, once") {
  at::manual_seed(0);
  ct::GradScaler scaler = MakeScaler();
  at::Tensor loss = at::randn({});
  CHECK(at::equal(scaler.Scale(loss), loss * 65536.0));
  // An fp16 loss is scaled in float32: 2 * 65536 would overflow fp16.
  at::Tensor scaled_half = scaler.Scale(at::full({}, 2.0, at::kHalf));
  CHECK(scaled_half.scalar_type() == at::kFloat);
  CHECK(scaled_half.item<double>() == 131072.0);

  Model model;
  at::Tensor grad = at::randn({3});
  model.SetScaledGrad(scaler, grad);
  at::Tensor scaled = model.w.grad().clone();
  REQUIRE(scaler.Unscale(model.sgd).ok());
  CHECK(at::equal(model.w.grad(), scaled.div(65536.0)));
  CHECK(at::equal(model.w.grad(), grad));
  // Step after Unscale does not divide again.
  at::Tensor before = model.w.detach().clone();
  REQUIRE(scaler.Step(model.sgd).value());
  CHECK(at::equal(model.w.grad(), grad));
  CHECK(at::equal(model.w.detach(), before.add(grad, -0.1)));  // SGD's first step: w - lr * grad
  REQUIRE(scaler.Update().ok());
}

TEST_CASE("GradScaler: fp16 and bf16 gradients are checked and unscaled") {
  for (at::ScalarType type : {at::kHalf, at::kBFloat16}) {
    CAPTURE(type);
    ct::GradScaler scaler = MakeScaler();
    at::Tensor w = at::zeros({2}, type).requires_grad_();
    torch::optim::SGD sgd(std::vector<at::Tensor>{w}, torch::optim::SGDOptions(0.1));
    w.mutable_grad() = at::tensor({1024.0f, 2048.0f}).to(type);
    REQUIRE(scaler.Unscale(sgd).ok());
    CHECK(at::equal(w.grad(), at::tensor({1024.0f / 65536, 2048.0f / 65536}).to(type)));
    REQUIRE(scaler.Update().ok());
    w.mutable_grad() = at::tensor({kNan, 1.0f}).to(type);
    REQUIRE_FALSE(scaler.Step(sgd).value());
    REQUIRE(scaler.Update().ok());
    CHECK(scaler.scale() == 32768.0);
  }
}

TEST_CASE("GradScaler: state round-trips and the next updates behave the same") {
  ct::GradScalerOptions options;
  options.growth_interval = 4;
  options.growth_factor = 4.0;
  options.backoff_factor = 0.25;
  ct::GradScaler saved = MakeScaler(nullptr, options);
  Model model;
  model.SetScaledGrad(saved, at::full({3}, kInf));
  REQUIRE_FALSE(saved.Step(model.sgd).value());
  REQUIRE(saved.Update().ok());
  for (int i = 0; i < 3; ++i) CleanStep(saved, model);
  REQUIRE(saved.scale() == 16384.0);
  REQUIRE(saved.growth_tracker() == 3);

  ct::GradScalerState state = saved.ToState();
  CHECK(state.size() == 5);
  CHECK(state.at("scale").item<double>() == 16384.0);
  CHECK(state.at("_growth_tracker").item<int64_t>() == 3);
  ct::GradScaler loaded = MakeScaler();  // default options, replaced by the state
  REQUIRE(loaded.FromState(state).ok());
  CHECK(loaded.scale() == saved.scale());
  CHECK(loaded.growth_tracker() == saved.growth_tracker());
  CHECK(loaded.options().growth_factor == 4.0);
  CHECK(loaded.options().backoff_factor == 0.25);
  CHECK(loaded.options().growth_interval == 4);

  Model other;
  CleanStep(saved, model);
  CleanStep(loaded, other);
  CHECK(saved.scale() == 65536.0);
  CHECK(loaded.scale() == saved.scale());
  CHECK(loaded.growth_tracker() == saved.growth_tracker());
  for (ct::GradScaler* scaler : {&saved, &loaded}) {
    Model m;
    m.SetScaledGrad(*scaler, at::full({3}, kNan));
    REQUIRE_FALSE(scaler->Step(m.sgd).value());
    REQUIRE(scaler->Update().ok());
  }
  CHECK(loaded.scale() == 16384.0);
  CHECK(saved.scale() == 16384.0);
}

TEST_CASE("GradScaler: a bad state is refused naming the key, and changes nothing") {
  ct::GradScaler scaler = MakeScaler();
  ct::GradScalerState good = scaler.ToState();
  auto refused = [&](ct::GradScalerState state, const std::string& key) {
    ctrun::Status status = scaler.FromState(state);
    CAPTURE(status.message());
    CHECK(status.IsInvalidArgument());
    CHECK(status.message().find(key) != std::string::npos);
    CHECK(scaler.scale() == 65536.0);
  };
  ct::GradScalerState state = good;
  state.erase("_growth_tracker");
  refused(state, "_growth_tracker");
  state = good;
  state["_growth_tracker"] = at::tensor(int64_t{2000});
  refused(state, "_growth_tracker");
  state = good;
  state["scale"] = at::tensor(-1.0);
  refused(state, "scale");
  state = good;
  state["backoff_factor"] = at::tensor({0.5, 0.5});
  refused(state, "backoff_factor");
  state = good;
  state["growth_interval"] = at::tensor(2.5);
  refused(state, "growth_interval");
}

TEST_CASE("GradScaler: calls out of order are FailedPrecondition") {
  ct::GradScaler scaler = MakeScaler();
  Model model;
  CHECK(scaler.Update().code() == ctrun::Status::Code::kFailedPrecondition);
  model.SetScaledGrad(scaler, at::ones({3}));
  REQUIRE(scaler.Unscale(model.sgd).ok());
  CHECK(scaler.Unscale(model.sgd).code() == ctrun::Status::Code::kFailedPrecondition);
  REQUIRE(scaler.Step(model.sgd).ok());
  CHECK(scaler.Step(model.sgd).status().code() == ctrun::Status::Code::kFailedPrecondition);
  CHECK(scaler.Unscale(model.sgd).code() == ctrun::Status::Code::kFailedPrecondition);
  REQUIRE(scaler.Update().ok());
  CleanStep(scaler, model);
}

TEST_CASE("GradScaler: bad options are one-line InvalidArgument naming the field") {
  auto refused = [](ct::GradScalerOptions options, const std::string& field) {
    auto scaler = ct::GradScaler::Create(options, nullptr);
    REQUIRE_FALSE(scaler.ok());
    CAPTURE(scaler.status().message());
    CHECK(scaler.status().IsInvalidArgument());
    CHECK(scaler.status().message().find(field) != std::string::npos);
    CHECK(scaler.status().message().find('\n') == std::string::npos);
  };
  for (double scale : {0.0, -1.0, static_cast<double>(kNan), 1e39}) {
    ct::GradScalerOptions options;
    options.init_scale = scale;
    refused(options, "init_scale");
  }
  for (double growth : {1.0, 0.5}) {
    ct::GradScalerOptions options;
    options.growth_factor = growth;
    refused(options, "growth_factor");
  }
  for (double backoff : {0.0, 1.0, 1.5, -0.5}) {
    ct::GradScalerOptions options;
    options.backoff_factor = backoff;
    refused(options, "backoff_factor");
  }
  for (int64_t interval : {0, -3}) {
    ct::GradScalerOptions options;
    options.growth_interval = interval;
    refused(options, "growth_interval");
  }
  CHECK(ct::GradScaler::Create({}, nullptr).ok());
}

TEST_CASE("GradScaler: the verdict is all-reduced on the collective device when one is given") {
  Group group(1);
  GroupComm comm(group, 0, 1);
  auto made = ct::GradScaler::Create({}, &comm, at::Device(at::kCPU));
  REQUIRE(made.ok());
  ct::GradScaler scaler = std::move(*made);
  Model model;
  model.SetScaledGrad(scaler, at::tensor({1.0f, kInf, 1.0f}));
  auto stepped = scaler.Step(model.sgd);
  REQUIRE(stepped.ok());
  CHECK(!*stepped);
  REQUIRE(comm.numel == std::vector<int64_t>{1});
  REQUIRE(scaler.Update().ok());
  CHECK(scaler.scale() == 32768.0);
}

TEST_CASE("GradScaler: RestoreSkippedSteps sets the count the next skip adds to") {
  ct::GradScaler scaler = MakeScaler();
  scaler.RestoreSkippedSteps(41);
  Model model;
  model.SetScaledGrad(scaler, at::tensor({kNan, 1.0f, 1.0f}));
  REQUIRE(!scaler.Step(model.sgd).value());
  CHECK(scaler.skipped_steps() == 42);
}
