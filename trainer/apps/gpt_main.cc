// ctrun-gpt: the example worker for tensor, pipeline and data parallelism.
// Trains a small GPT-style decoder on byte-level text (the Debian license
// texts by default) on a (pp, dp, tp) device mesh, one process per rank,
// under ctrun/torchrun. See docs/trainer.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>

#if defined(CTRUN_HAVE_GLOG)
#include <glog/logging.h>
#endif

#include "trainer/apps/gpt_flags.h"
#include "trainer/parallel/ddp.h"
#include "trainer/comm/device_mesh.h"
#include "trainer/comm/dist_env.h"
#include "trainer/models/gpt.h"
#include "trainer/parallel/memory_meter.h"
#include "trainer/checkpoint/mesh_checkpoint.h"
#include "trainer/parallel/pipeline.h"
#include "trainer/comm/process_group.h"
#include "trainer/data/text_corpus.h"
#include "trainer/comm/torch_error.h"

namespace ctrun::trainer {
namespace {

constexpr int kExitUsage = 2;

struct Failure {
  Status status;
  int code = 1;
};

int64_t PeakRssKb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

std::string LayoutTable(const MeshShape& shape, int layers, const std::vector<int>& split) {
  std::string out = "mesh " + shape.ToString() + ":";
  for (int rank = 0; rank < shape.size(); ++rank) {
    const MeshCoord c = shape.CoordOf(rank);
    const auto range = StageLayers(layers, shape.pp, c.pp, split);
    out += "\n  rank " + std::to_string(rank) + ": stage " + std::to_string(c.pp) + " (blocks " +
           std::to_string(range[0]) + "-" + std::to_string(range[1] - 1) + (c.pp == 0 ? ", embedding" : "") +
           (c.pp == shape.pp - 1 ? ", head" : "") + "), dp replica " + std::to_string(c.dp) + ", tp slice " +
           std::to_string(c.tp) + "/" + std::to_string(shape.tp);
  }
  return out;
}

Status DumpParams(const std::string& prefix, const MeshCoord& coord, torch::nn::Module& stage,
                  const ShardRegistry& registry) {
  const std::string base = prefix + ".pp" + std::to_string(coord.pp) + ".tp" + std::to_string(coord.tp);
  std::ofstream bin(base + ".bin", std::ios::binary | std::ios::trunc);
  std::ofstream index(base + ".json", std::ios::trunc);
  index << "[";
  bool first = true;
  for (const auto& item : stage.named_parameters(true)) {
    const ShardSpec& spec = registry.at(item.key());
    at::Tensor flat = item.value().detach().contiguous().reshape({-1});
    bin.write(reinterpret_cast<const char*>(flat.data_ptr<float>()), static_cast<std::streamsize>(flat.numel() * 4));
    std::string shape;
    for (int64_t d : spec.full_shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    index << (first ? "" : ",") << "\n {\"name\": \"" << item.key() << "\", \"full_shape\": [" << shape
          << "], \"dim\": " << spec.dim << ", \"index\": " << spec.index << ", \"parts\": " << spec.parts
          << ", \"numel\": " << flat.numel() << "}";
    first = false;
  }
  index << "\n]\n";
  if (!bin || !index) return Status::IOError("--dump-params: cannot write " + base + ".bin/.json");
  return Status::Ok();
}

Failure Run(const GptFlags& flags) {
  auto env = ReadDistEnv(ProcessEnv());
  if (!env.ok()) return {env.status(), kExitUsage};
  at::set_num_threads(static_cast<int>(flags.threads));
  TensorMemoryMeter::Install();

  MeshShape shape = flags.mesh_shape;
  if (shape.dp == 0) shape.dp = std::max(1, env->world_size / (shape.pp * shape.tp));
  const GptConfig config{.vocab = kByteVocab, .width = flags.width, .heads = flags.heads, .layers = flags.layers,
                         .seq_len = flags.seq_len};
  Status fits = CheckMeshShape(shape, env->world_size,
                               GptLimits(config, static_cast<int>(flags.global_batch),
                                         static_cast<int>(flags.micro_batches)));
  if (!fits.ok()) return {fits, kExitUsage};
  std::vector<int> split;
  if (!flags.pp_split.empty()) split = *ParseStageSplit(flags.pp_split, shape.pp, static_cast<int>(flags.layers));

  auto corpus = LoadTextCorpus(flags.data.empty() ? kDefaultCorpusDir : flags.data, flags.seq_len + 2);
  if (!corpus.ok()) return {corpus.status(), kExitUsage};

  ProcessGroupOptions pg_options;
  pg_options.timeout = std::chrono::seconds(flags.store_timeout_s);
  pg_options.gloo_threads = 1;
  auto backend = ParseCommBackend(flags.backend);
  if (!backend.ok()) return {backend.status(), kExitUsage};
  pg_options.backend = *backend;
  auto world = ConnectProcessGroup(*env, pg_options);
  if (!world.ok()) return {world.status()};
  auto mesh = DeviceMesh::Create(*world, shape);
  if (!mesh.ok()) return {mesh.status()};
  const MeshCoord coord = (*mesh)->coord();
  if (env->rank == 0) {
    std::printf("%s\n", LayoutTable(shape, static_cast<int>(flags.layers), split).c_str());
    if (shape.pp > 1) {
      std::printf("pipeline: %d stages, %lld micro-batches, %s: bubble (p-1)/(m+p-1) = %.3f of a step\n", shape.pp,
                  static_cast<long long>(flags.micro_batches), PipeScheduleName(flags.schedule),
                  BubbleFraction(shape.pp, static_cast<int>(flags.micro_batches)));
    }
    std::fflush(stdout);
  }

  ShardRegistry registry;
  LayerContext ctx{.name = "", .seed = static_cast<uint64_t>(flags.seed), .tp = (*mesh)->group(MeshDim::kTp),
                   .registry = &registry, .sequence_parallel = flags.sequence_parallel};
  const auto layers = StageLayers(static_cast<int>(flags.layers), shape.pp, coord.pp, split);
  GptStage stage(config, ctx, coord.pp, shape.pp, layers[0], layers[1]);

  std::unique_ptr<DistributedDataParallel> ddp;
  if (Communicator* dp = (*mesh)->group(MeshDim::kDp)) {
    auto made = DistributedDataParallel::Create(*stage, *dp);
    if (!made.ok()) return {made.status()};
    ddp = std::move(*made);
  }
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (flags.optimizer == "sgd") {
    optimizer = std::make_unique<torch::optim::SGD>(stage->parameters(),
                                                    torch::optim::SGDOptions(flags.lr).momentum(flags.momentum));
  } else {
    optimizer = std::make_unique<torch::optim::Adam>(stage->parameters(), torch::optim::AdamOptions(flags.lr));
  }

  int64_t start_step = 0;
  if (!flags.checkpoint_dir.empty()) {
    auto loaded = LoadMeshCheckpoint(flags.checkpoint_dir, **mesh, *stage, registry, *optimizer);
    if (!loaded.ok()) return {loaded.status()};
    if (loaded->has_value()) {
      start_step = (*loaded)->step;
      if (env->rank == 0) {
        std::printf("resumed from step %lld (saved by %lld ranks)\n", static_cast<long long>(start_step),
                    static_cast<long long>((*loaded)->world_size));
        std::fflush(stdout);
      }
    }
  }

  Pipeline pipeline(stage.get(), (*mesh)->group(MeshDim::kPp), ddp.get(), flags.schedule,
                    static_cast<int>(flags.micro_batches));
  const bool reporter = coord.pp == shape.pp - 1 && coord.dp == 0 && coord.tp == 0;
  const int64_t rows = flags.global_batch / shape.dp;
  double step_sum = 0, compute_sum = 0;
  int measured = 0, peak_in_flight = 0;
  int64_t peak_step_bytes = 0, peak_tensor_high = 0;
  for (int64_t step = start_step; step < flags.steps; ++step) {
    if (env->restart_count == 0 && coord.pp == flags.crash_stage && step == flags.crash_at_step) {
      std::fprintf(stderr, "ctrun-gpt: rank %d (stage %d): fault injection, SIGKILL before step %lld\n", env->rank,
                   coord.pp, static_cast<long long>(step));
      std::raise(SIGKILL);
    }
    TokenBatch batch = SampleBatch(*corpus, step, flags.seed, flags.global_batch, flags.seq_len);
    at::Tensor tokens = batch.tokens.narrow(0, coord.dp * rows, rows);
    at::Tensor targets = batch.targets.narrow(0, coord.dp * rows, rows);
    optimizer->zero_grad();
    auto stats = pipeline.Step(tokens, targets);
    if (!stats.ok()) return {stats.status()};
    Status summed = SumPartialGrads(*stage, registry, (*mesh)->group(MeshDim::kTp));
    if (!summed.ok()) return {summed};
    optimizer->step();
    if (step > start_step) {  // the first step pays for the groups' warm-up
      step_sum += stats->step_seconds;
      compute_sum += stats->compute_seconds;
      ++measured;
    }
    peak_in_flight = std::max(peak_in_flight, stats->peak_in_flight);
    // The first step also allocates every gradient (later steps zero them in
    // place): it counts only when it is the only step.
    if (step > start_step || step + 1 == flags.steps) {
      peak_step_bytes = std::max(peak_step_bytes, stats->peak_step_bytes);
    }
    peak_tensor_high = std::max(peak_tensor_high, TensorMemoryMeter::PeakBytes());
    if (flags.show_schedule && step == start_step && coord.dp == 0 && coord.tp == 0) {
      std::printf("schedule stage=%d: %s\n", coord.pp, stats->order.c_str());
      std::fflush(stdout);
    }
    double loss = stats->loss;
    if (stage->last() && ddp) {
      at::Tensor t = at::scalar_tensor(loss, at::kDouble).reshape({1});
      Status reduced = WaitWork((*mesh)->group(MeshDim::kDp)->AllReduceSum(t), "all-reduce of the loss");
      if (!reduced.ok()) return {reduced};
      loss = t.item<double>() / shape.dp;
    }
    const bool log = flags.log_every > 0 && ((step + 1) % flags.log_every == 0 || step == start_step ||
                                             step + 1 == flags.steps);
    if (reporter && log) {
      std::printf("step %lld loss %.8f step_time %.4f s\n", static_cast<long long>(step + 1), loss,
                  stats->step_seconds);
      std::fflush(stdout);
    }
    if (!flags.checkpoint_dir.empty() && ((step + 1) % flags.checkpoint_every == 0 || step + 1 == flags.steps)) {
      TrainPosition position{.step = step + 1, .epoch = 0, .epoch_consumed = 0, .world_size = env->world_size,
                             .seed = flags.seed};
      Status saved = SaveMeshCheckpoint(flags.checkpoint_dir, **mesh, *stage, registry, *optimizer, position);
      if (!saved.ok()) return {saved};
    }
  }
  int64_t param_bytes = 0;
  for (const auto& p : stage->parameters()) param_bytes += p.numel() * p.element_size();
  std::fprintf(stderr,
               "STATS rank=%d stage=%d dp=%d tp=%d steps=%d step_s=%.6f compute_s=%.6f bubble=%.4f peak_in_flight=%d "
               "param_bytes=%lld peak_step_bytes=%lld peak_tensor_bytes=%lld peak_rss_kb=%lld\n",
               env->rank, coord.pp, coord.dp, coord.tp, measured, measured ? step_sum / measured : 0.0,
               measured ? compute_sum / measured : 0.0, step_sum > 0 ? 1.0 - compute_sum / step_sum : 0.0,
               peak_in_flight, static_cast<long long>(param_bytes),
               static_cast<long long>(peak_step_bytes), static_cast<long long>(peak_tensor_high),
               static_cast<long long>(PeakRssKb()));
  if (!flags.dump_params.empty() && coord.dp == 0) {
    Status dumped = DumpParams(flags.dump_params, coord, *stage, registry);
    if (!dumped.ok()) return {dumped};
  }
  Status done = WaitWork((*world)->Barrier(), "final barrier");
  return {done, done.ok() ? 0 : 1};
}

}  // namespace
}  // namespace ctrun::trainer

int main(int argc, char** argv) {
  using namespace ctrun::trainer;
#if defined(CTRUN_HAVE_GLOG)
  if (std::getenv("GLOG_minloglevel") == nullptr) FLAGS_minloglevel = google::GLOG_FATAL;
#endif
  auto flags = ParseGptFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) {
    std::fprintf(stderr, "ctrun-gpt: %s\n", flags.status().message().c_str());
    return kExitUsage;
  }
  if (flags->help) {
    std::fputs(GptUsage().c_str(), stdout);
    return 0;
  }
  Failure failure;
  try {
    failure = Run(*flags);
  } catch (const std::exception& error) {
    failure = {ctrun::Status::Internal(TorchErrorLine(error)), 1};
  }
  if (!failure.status.ok()) {
    std::fprintf(stderr, "ctrun-gpt: %s\n", failure.status.message().c_str());
    return failure.code;
  }
  return 0;
}
