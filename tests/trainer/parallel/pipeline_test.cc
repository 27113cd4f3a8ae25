// Pipeline::Step's batch checks, on one stage (no pp group): a bad batch, or
// chunks the schedule or the pipeline cannot run, is refused before the
// stage runs.
#include <ATen/ATen.h>
#include "tests/trainer/catch_after_torch.h"

#include "trainer/parallel/pipeline.h"

namespace ct = ctrun::trainer;

namespace {

// The whole model in one stage: output = input * w, loss = mean(output).
class OneStage : public ct::PipelineStage {
 public:
  at::Tensor Forward(const at::Tensor& input) override {
    ++forwards;
    return input.to(at::kFloat) * weight;
  }
  at::Tensor Loss(const at::Tensor& output, const at::Tensor&) const override { return output.mean(); }
  std::vector<int64_t> ActivationShape(int64_t batch) const override { return {batch, 3}; }
  bool first() const override { return true; }
  bool last() const override { return true; }

  at::Tensor weight = at::ones({1}, at::kFloat).requires_grad_(true);
  int forwards = 0;
};

ct::Pipeline MakePipeline(OneStage& stage, int micro_batches) {
  return ct::Pipeline(&stage, nullptr, nullptr, ct::PipeSchedule::kGPipe, micro_batches);
}

}  // namespace

TEST_CASE("a batch that divides into the micro-batches runs them all") {
  OneStage stage;
  ct::Pipeline pipeline = MakePipeline(stage, 2);
  auto stats = pipeline.Step(at::ones({4, 3}, at::kLong), at::zeros({4, 3}, at::kLong));
  REQUIRE(stats.ok());
  CHECK(stage.forwards == 2);
  CHECK(stats->loss == Approx(1.0));
  CHECK(stage.weight.grad().item<double>() == Approx(1.0));
}

TEST_CASE("a batch not divisible by the micro-batch count is InvalidArgument") {
  OneStage stage;
  ct::Pipeline pipeline = MakePipeline(stage, 2);
  auto stats = pipeline.Step(at::ones({5, 3}, at::kLong), at::zeros({5, 3}, at::kLong));
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().IsInvalidArgument());
  CHECK_THAT(stats.status().message(), Catch::Contains("5 rows") && Catch::Contains("2 micro-batches"));
  CHECK(stage.forwards == 0);
}

TEST_CASE("an empty batch, a target count that differs, or no micro-batches is InvalidArgument") {
  OneStage stage;
  CHECK(MakePipeline(stage, 2).Step(at::ones({0, 3}, at::kLong), at::zeros({0, 3}, at::kLong))
            .status().IsInvalidArgument());
  CHECK(MakePipeline(stage, 2).Step(at::ones({4, 3}, at::kLong), at::zeros({2, 3}, at::kLong))
            .status().IsInvalidArgument());
  CHECK(MakePipeline(stage, 0).Step(at::ones({4, 3}, at::kLong), at::zeros({4, 3}, at::kLong))
            .status().IsInvalidArgument());
  CHECK(MakePipeline(stage, 1).Step(at::Tensor(), at::Tensor()).status().IsInvalidArgument());
  CHECK(stage.forwards == 0);
}

TEST_CASE("several chunks need the interleaved schedule and a pipeline of 2 stages or more") {
  OneStage first, second;
  const at::Tensor tokens = at::ones({4, 3}, at::kLong), targets = at::zeros({4, 3}, at::kLong);
  auto plain = ct::Pipeline({&first, &second}, nullptr, nullptr, ct::PipeSchedule::k1F1B, 2).Step(tokens, targets);
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.status().message() ==
        "--pp-virtual-stages 2 needs --pp-schedule interleaved (1f1b runs one model chunk per stage)");
  auto alone = ct::Pipeline({&first, &second}, nullptr, nullptr, ct::PipeSchedule::kInterleaved, 2)
                   .Step(tokens, targets);
  REQUIRE_FALSE(alone.ok());
  CHECK(alone.status().IsInvalidArgument());
  CHECK(alone.status().message() == "pipeline: 2 model chunks a stage need a pipeline of 2 stages or more");
  CHECK(first.forwards + second.forwards == 0);
}

TEST_CASE("one chunk under the interleaved schedule runs as 1F1B") {
  OneStage stage;
  auto stats = ct::Pipeline({&stage}, nullptr, nullptr, ct::PipeSchedule::kInterleaved, 2)
                   .Step(at::ones({4, 3}, at::kLong), at::zeros({4, 3}, at::kLong));
  REQUIRE(stats.ok());
  CHECK(stats->order == "F0 B0 F1 B1");
  CHECK(stage.weight.grad().item<double>() == Approx(1.0));
}

TEST_CASE("a step's forward time is within its compute time, on both clocks") {
  OneStage stage;
  ct::Pipeline pipeline = MakePipeline(stage, 1);
  auto stats = pipeline.Step(at::ones({2, 3}, at::kLong), at::zeros({2, 3}, at::kLong));
  REQUIRE(stats.ok());
  CHECK(stats->forward_seconds >= 0);
  CHECK(stats->forward_seconds <= stats->compute_seconds);
  CHECK(stats->compute_seconds <= stats->step_seconds);
  CHECK(stats->forward_cpu_seconds >= 0);
  CHECK(stats->forward_cpu_seconds <= stats->step_cpu_seconds);
}
