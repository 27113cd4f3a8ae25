#include "trainer/apps/fashion_mnist_worker.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "trainer/checkpoint/sharded_checkpoint.h"
#include "trainer/checkpoint/topk_state.h"
#include "trainer/comm/process_group.h"
#include "trainer/models/small_cnn_stages.h"

namespace ctrun::trainer {

Result<std::vector<double>> Worker::SumOverRanks(const std::vector<double>& values) {
  at::Tensor t = at::tensor(values, at::kDouble).to(device);
  CTRUN_RETURN_IF_ERROR(WaitWork(comm->AllReduceSum(t), "all-reduce of metrics"));
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

namespace {

// SGD(lr, momentum). Under top-k the momentum is DGC's momentum correction,
// applied inside the compression (topk_compression.h): the optimizer then
// runs without momentum.
std::unique_ptr<torch::optim::Optimizer> MakeSgd(const TrainFlags& flags, std::vector<at::Tensor> params) {
  const double momentum = flags.topk_density > 0 ? 0.0 : flags.momentum;
  return std::make_unique<torch::optim::SGD>(std::move(params),
                                             torch::optim::SGDOptions(flags.lr).momentum(momentum));
}

void SetThreads(Worker& w) {
  w.threads = w.flags.threads;
  if (w.flags.deterministic) w.threads = 1;
  if (w.threads == 0) {
    w.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / w.env.local_world_size);
  }
  at::set_num_threads(w.threads);
  if (w.flags.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
}

// --checkpoint-dir, made with its parents when missing (as Python's
// os.makedirs(exist_ok=True)); a path that exists and is not a directory is
// an error. Every rank may race to make it: that is harmless.
Status MakeCheckpointDir(const std::string& dir) {
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (std::filesystem::is_directory(dir)) return Status::Ok();
  if (std::filesystem::exists(dir)) {
    return Status::InvalidArgument("--checkpoint-dir '" + dir +
                                   "' exists and is not a directory; give a directory (it is made if missing)");
  }
  return Status::IOError("--checkpoint-dir '" + dir + "': cannot create it (" +
                         (ec ? ec.message() : std::string("unknown error")) + "); give a writable directory");
}

// Data first: a missing dataset must fail before anything is written.
Status LoadData(Worker& w) {
  auto train = LoadFashionMnist(w.flags.data_dir, "train", w.flags.train_limit);
  if (!train.ok()) return train.status();
  w.train = std::move(*train);
  auto test = LoadFashionMnist(w.flags.data_dir, "t10k", w.flags.test_limit);
  if (!test.ok()) return test.status();
  w.test = std::move(*test);
  return MakeCheckpointDir(w.flags.checkpoint_dir);
}

Status Connect(Worker& w, CommBackend backend) {
  ProcessGroupOptions pg_options;
  pg_options.backend = backend;
  pg_options.timeout = std::chrono::seconds(w.flags.store_timeout_s);
  auto comm = ConnectProcessGroup(w.env, pg_options);
  if (!comm.ok()) return comm.status();
  w.comm = std::move(*comm);
  w.device = backend == CommBackend::kNccl
                 ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(w.env.local_rank))
                 : at::Device(at::kCPU);
  return Status::Ok();
}

// The seeded model, FSDP around it under zero2/fsdp, and its optimizer.
Status MakeModel(Worker& w) {
  const TrainFlags& flags = w.flags;
  at::manual_seed(static_cast<uint64_t>(flags.seed));
  w.model = SmallCnn();
  w.model->to(w.device);
  if (flags.strategy == "fsdp" || flags.strategy == "zero2") {
    FsdpOptions fsdp_options;
    fsdp_options.strategy = flags.strategy == "fsdp" ? ShardingStrategy::kFullShard
                                                     : ShardingStrategy::kShardGradOp;
    fsdp_options.min_unit_params = flags.min_unit_params;
    fsdp_options.mixed_precision = flags.mixed_precision;
    auto made = FullyShardedDataParallel::Create(*w.model, SmallCnnStages(*w.model), *w.comm, fsdp_options);
    if (!made.ok()) return made.status();
    w.fsdp = std::move(*made);
    w.optimizer = MakeSgd(flags, w.fsdp->parameters());
  } else {
    w.optimizer = MakeSgd(flags, w.model->parameters());
  }
  if (flags.strategy == "zero1" && !flags.checkpoint_dir.empty()) {
    return Status::InvalidArgument("--checkpoint-dir with --strategy zero1: not supported by this "
                                   "worker yet; use ddp, zero2 or fsdp, or drop --checkpoint-dir");
  }
  return Status::Ok();
}

// Loads the checkpoint, if any, into the model, optimizer and position.
Status Resume(Worker& w) {
  const TrainFlags& flags = w.flags;
  w.position = TrainPosition{.step = 0, .epoch = 0, .epoch_consumed = 0,
                             .world_size = w.env.world_size, .seed = flags.seed};
  w.ckpt_path = flags.checkpoint_dir.empty() ? "" : flags.checkpoint_dir + "/checkpoint.pt";
  w.sharded_dir = flags.checkpoint_dir.empty() ? "" : flags.checkpoint_dir + "/sharded";
  if (w.fsdp && !w.sharded_dir.empty()) std::filesystem::create_directories(w.sharded_dir);
  if (w.ckpt_path.empty()) return Status::Ok();
  auto loaded = w.fsdp ? LoadShardedCheckpoint(w.sharded_dir, *w.fsdp, *w.optimizer)
                       : LoadCheckpoint(w.ckpt_path, *w.model, *w.optimizer);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->has_value()) return Status::Ok();
  const TrainPosition saved = **loaded;
  if (saved.seed != flags.seed) {
    return Status::InvalidArgument("checkpoint '" + w.ckpt_path + "' was saved with --seed " +
                                   std::to_string(saved.seed) + ", not " +
                                   std::to_string(flags.seed) +
                                   "; pass the same seed or another --checkpoint-dir");
  }
  w.position = saved;
  w.resumed = true;
  w.Log("resuming from '" + (w.fsdp ? w.sharded_dir : w.ckpt_path) + "': step " +
        std::to_string(saved.step) + ", epoch " + std::to_string(saved.epoch) + ", " +
        std::to_string(saved.epoch_consumed) + " samples into it (saved with " +
        std::to_string(saved.world_size) + " ranks, now " + std::to_string(w.env.world_size) + ")");
  return Status::Ok();
}

// Every rank must resume from the same position (they read the same file,
// but a rank on another host could see another one).
Status CheckSamePosition(Worker& w) {
  const double step = static_cast<double>(w.position.step);
  auto sums = w.SumOverRanks({step, step * step});
  if (!sums.ok()) return sums.status();
  const double world = w.env.world_size;
  if ((*sums)[0] != world * step || (*sums)[1] != world * step * step) {
    return Status::FailedPrecondition("ranks resumed from different checkpoints (steps differ); "
                                      "give all ranks the same --checkpoint-dir on shared storage");
  }
  return Status::Ok();
}

// ddp/zero1: DDP around the model; zero1 swaps the optimizer for ZeRO-1's.
Status WrapDdp(Worker& w, GradCompression compression) {
  if (w.fsdp) return Status::Ok();
  DdpOptions ddp_options;
  ddp_options.bucket_cap_mb = w.flags.bucket_cap_mb;
  ddp_options.first_bucket_cap_mb = std::min(1.0, w.flags.bucket_cap_mb);
  ddp_options.compression = compression;
  ddp_options.topk = TopkOptions{.density = w.flags.topk_density,
                                 .error_feedback = w.flags.topk_error_feedback,
                                 .momentum = w.flags.momentum,
                                 .warmup_steps = w.flags.topk_warmup_steps,
                                 .clip_norm = w.flags.topk_clip};
  auto ddp = DistributedDataParallel::Create(*w.model, *w.comm, ddp_options);
  if (!ddp.ok()) return ddp.status();
  w.ddp = std::move(*ddp);
  if (w.flags.strategy == "zero1") {
    w.optimizer.reset();
    const TrainFlags& flags = w.flags;
    auto zero = ZeroRedundancyOptimizer::Create(
        *w.model, *w.comm, [&flags](std::vector<at::Tensor> params) { return MakeSgd(flags, std::move(params)); });
    if (!zero.ok()) return zero.status();
    w.zero = std::move(*zero);
  }
  return Status::Ok();
}

// Under top-k, after a resume: this rank's DGC state from the checkpoint
// (topk_state.h: the same world size restores it exactly, another starts
// every rank from the saved ranks' mean). The ranks agree on the outcome, so
// a rank whose file is bad stops them all.
Status ResumeTopk(Worker& w) {
  if (!w.resumed || !w.ddp || w.flags.topk_density <= 0) return Status::Ok();
  TopkState state = w.ddp->topk_state();
  auto resumed = ResumeTopkState(w.flags.checkpoint_dir, w.position.step, static_cast<int>(w.position.world_size),
                                 w.env.rank, w.env.world_size, state);
  auto failed = w.SumOverRanks({resumed.ok() ? 0.0 : 1.0});
  if (!failed.ok()) return failed.status();
  if (!resumed.ok()) return resumed.status();
  if ((*failed)[0] > 0) {
    return Status::InvalidArgument("another rank could not restore its top-k state from '" +
                                   TopkStateDir(w.flags.checkpoint_dir, w.position.step) + "' (see its error)");
  }
  w.ddp->set_topk_synced_steps(state.synced_steps);
  w.Log(resumed->line);
  return Status::Ok();
}

Status MakeSampler(Worker& w) {
  SamplerOptions sampler_options;
  sampler_options.dataset_size = w.train.size();
  sampler_options.num_replicas = w.env.world_size;
  sampler_options.rank = w.env.rank;
  sampler_options.seed = static_cast<uint64_t>(w.flags.seed);
  auto sampler = DistributedSampler::Create(sampler_options);
  if (!sampler.ok()) return sampler.status();
  w.sampler.emplace(std::move(*sampler));
  return Status::Ok();
}

}  // namespace

Status SetUp(Worker& w) {
  auto env = ReadDistEnv(ProcessEnv());
  if (!env.ok()) return env.status();
  w.env = *env;
  w.chief = w.env.rank == 0;
  auto backend = ParseCommBackend(w.flags.backend);
  if (!backend.ok()) return backend.status();
  auto compression = w.flags.topk_density > 0 ? Result<GradCompression>(GradCompression::kTopk)
                                              : ParseGradCompression(w.flags.grad_compression);
  if (!compression.ok()) return compression.status();
  SetThreads(w);
  CTRUN_RETURN_IF_ERROR(LoadData(w));
  CTRUN_RETURN_IF_ERROR(Connect(w, *backend));
  CTRUN_RETURN_IF_ERROR(MakeModel(w));
  CTRUN_RETURN_IF_ERROR(Resume(w));
  CTRUN_RETURN_IF_ERROR(CheckSamePosition(w));
  CTRUN_RETURN_IF_ERROR(WrapDdp(w, *compression));
  CTRUN_RETURN_IF_ERROR(ResumeTopk(w));
  return MakeSampler(w);
}

}  // namespace ctrun::trainer
