// ctrun-fashion-mnist: the example worker. Trains SmallCnn on Fashion-MNIST
// with DistributedDataParallel (or ZeRO-1, ZeRO-2/FSDP: --strategy), one
// process per rank, under ctrun/torchrun.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#if defined(CTRUN_HAVE_GLOG)
#include <glog/logging.h>
#endif

#include "trainer/apps/train_flags.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/parallel/ddp.h"
#include "trainer/comm/dist_env.h"
#include "trainer/data/distributed_sampler.h"
#include "trainer/data/fashion_mnist.h"
#include "trainer/parallel/fsdp.h"
#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/comm/process_group.h"
#include "trainer/checkpoint/sharded_checkpoint.h"
#include "trainer/models/small_cnn.h"
#include "trainer/models/small_cnn_stages.h"
#include "trainer/parallel/zero_optimizer.h"

namespace ctrun::trainer {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string JsonEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// torchrun's error-file contract: the launcher reports this message as the
// root cause instead of "exit code 1".
void WriteErrorFile(const std::string& message) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  std::ofstream out(path, std::ios::trunc);
  out << "{\"message\": \"" << JsonEscape(message) << "\", \"timestamp\": "
      << static_cast<long long>(std::time(nullptr)) << "}\n";
}

// Sums `values` over ranks (on `device`: NCCL reduces GPU tensors only).
Result<std::vector<double>> SumOverRanks(Communicator& comm, const std::vector<double>& values,
                                         const at::Device& device) {
  at::Tensor t = at::tensor(values, at::kDouble).to(device);
  CTRUN_RETURN_IF_ERROR(WaitWork(comm.AllReduceSum(t), "all-reduce of metrics"));
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

using ForwardFn = std::function<Result<at::Tensor>(const at::Tensor&)>;

// Loss sum and correct count of `model` over test samples rank, rank+R, ...
Result<std::pair<double, double>> Evaluate(SmallCnn& model, const ForwardFn& forward,
                                           const ImageDataset& test, int rank, int world,
                                           const at::Device& device) {
  at::NoGradGuard no_grad;
  model->eval();
  at::Tensor idx = at::arange(rank, test.size(), world, at::kLong);
  double loss = 0, correct = 0;
  for (int64_t begin = 0; begin < idx.numel(); begin += 1000) {
    at::Tensor part = idx.narrow(0, begin, std::min<int64_t>(1000, idx.numel() - begin));
    at::Tensor x = test.images.index_select(0, part).to(device);
    at::Tensor y = test.labels.index_select(0, part).to(device);
    auto logits = forward(x);
    if (!logits.ok()) return logits.status();
    loss += at::cross_entropy_loss(*logits, y, {}, at::Reduction::Sum).item<double>();
    correct += logits->argmax(1).eq(y).sum().item<double>();
  }
  model->train();
  return std::make_pair(loss, correct);
}

int64_t StorageBytes(const std::vector<at::Tensor>& tensors) {
  std::set<const void*> seen;
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (t.defined() && seen.insert(t.storage().data()).second) total += static_cast<int64_t>(t.storage().nbytes());
  }
  return total;
}

Status Run(const TrainFlags& flags) {
  auto env = ReadDistEnv(ProcessEnv());
  if (!env.ok()) return env.status();
  const bool chief = env->rank == 0;
  auto log = [&](const std::string& line) {
    if (chief) std::printf("%s\n", line.c_str()), std::fflush(stdout);
  };

  auto backend = ParseCommBackend(flags.backend);
  if (!backend.ok()) return backend.status();
  auto compression = ParseGradCompression(flags.grad_compression);
  if (!compression.ok()) return compression.status();
  int threads = flags.threads;
  if (flags.deterministic) threads = 1;
  if (threads == 0) {
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / env->local_world_size);
  }
  at::set_num_threads(threads);
  if (flags.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);

  // Data first: a missing dataset must fail before anything is written.
  auto train = LoadFashionMnist(flags.data_dir, "train", flags.train_limit);
  if (!train.ok()) return train.status();
  auto test = LoadFashionMnist(flags.data_dir, "t10k", flags.test_limit);
  if (!test.ok()) return test.status();
  if (!flags.checkpoint_dir.empty() && !std::filesystem::is_directory(flags.checkpoint_dir)) {
    return Status::NotFound("--checkpoint-dir '" + flags.checkpoint_dir +
                            "' is not a directory; create it first");
  }

  ProcessGroupOptions pg_options;
  pg_options.backend = *backend;
  pg_options.timeout = std::chrono::seconds(flags.store_timeout_s);
  auto comm_or = ConnectProcessGroup(*env, pg_options);
  if (!comm_or.ok()) return comm_or.status();
  Communicator& comm = **comm_or;
  const at::Device device = *backend == CommBackend::kNccl
                                ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env->local_rank))
                                : at::Device(at::kCPU);

  at::manual_seed(static_cast<uint64_t>(flags.seed));
  SmallCnn model;
  model->to(device);
  const bool fsdp_path = flags.strategy == "fsdp" || flags.strategy == "zero2";
  auto make_sgd = [&](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::SGD>(std::move(params),
                                               torch::optim::SGDOptions(flags.lr).momentum(flags.momentum));
  };
  std::unique_ptr<FullyShardedDataParallel> fsdp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (fsdp_path) {
    FsdpOptions fsdp_options;
    fsdp_options.strategy = flags.strategy == "fsdp" ? ShardingStrategy::kFullShard
                                                     : ShardingStrategy::kShardGradOp;
    fsdp_options.min_unit_params = flags.min_unit_params;
    fsdp_options.mixed_precision = flags.mixed_precision;
    auto made = FullyShardedDataParallel::Create(*model, SmallCnnStages(*model), comm, fsdp_options);
    if (!made.ok()) return made.status();
    fsdp = std::move(*made);
    optimizer = make_sgd(fsdp->parameters());
  } else {
    optimizer = make_sgd(model->parameters());
  }
  if (flags.strategy == "zero1" && !flags.checkpoint_dir.empty()) {
    return Status::InvalidArgument("--checkpoint-dir with --strategy zero1: not supported by this "
                                   "worker yet; use ddp, zero2 or fsdp, or drop --checkpoint-dir");
  }

  TrainPosition position{.step = 0, .epoch = 0, .epoch_consumed = 0,
                         .world_size = env->world_size, .seed = flags.seed};
  const std::string ckpt_path =
      flags.checkpoint_dir.empty() ? "" : flags.checkpoint_dir + "/checkpoint.pt";
  // zero2/fsdp: sharded checkpoints in <dir>/sharded (any world size), and a
  // consolidated checkpoint.pt (the DDP format) when training ends.
  const std::string sharded_dir = flags.checkpoint_dir.empty() ? "" : flags.checkpoint_dir + "/sharded";
  if (fsdp && !sharded_dir.empty()) std::filesystem::create_directories(sharded_dir);
  if (!ckpt_path.empty()) {
    auto loaded = fsdp ? LoadShardedCheckpoint(sharded_dir, *fsdp, *optimizer)
                       : LoadCheckpoint(ckpt_path, *model, *optimizer);
    if (!loaded.ok()) return loaded.status();
    if (loaded->has_value()) {
      const TrainPosition saved = **loaded;
      if (saved.seed != flags.seed) {
        return Status::InvalidArgument("checkpoint '" + ckpt_path + "' was saved with --seed " +
                                       std::to_string(saved.seed) + ", not " +
                                       std::to_string(flags.seed) +
                                       "; pass the same seed or another --checkpoint-dir");
      }
      position = saved;
      log("resuming from '" + (fsdp ? sharded_dir : ckpt_path) + "': step " +
          std::to_string(saved.step) + ", epoch " + std::to_string(saved.epoch) + ", " + std::to_string(saved.epoch_consumed) +
          " samples into it (saved with " + std::to_string(saved.world_size) + " ranks, now " +
          std::to_string(env->world_size) + ")");
    }
  }
  // Every rank must resume from the same position (they read the same file,
  // but a rank on another host could see another one).
  {
    auto sums = SumOverRanks(comm, {static_cast<double>(position.step),
                                    static_cast<double>(position.step) * position.step},
                             device);
    if (!sums.ok()) return sums.status();
    const double w = env->world_size, s = position.step;
    if ((*sums)[0] != w * s || (*sums)[1] != w * s * s) {
      return Status::FailedPrecondition("ranks resumed from different checkpoints (steps differ); "
                                        "give all ranks the same --checkpoint-dir on shared storage");
    }
  }

  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<ZeroRedundancyOptimizer> zero;
  if (!fsdp) {
    DdpOptions ddp_options;
    ddp_options.bucket_cap_mb = flags.bucket_cap_mb;
    ddp_options.first_bucket_cap_mb = std::min(1.0, flags.bucket_cap_mb);
    ddp_options.compression = *compression;
    auto ddp_or = DistributedDataParallel::Create(*model, comm, ddp_options);
    if (!ddp_or.ok()) return ddp_or.status();
    ddp = std::move(*ddp_or);
    if (flags.strategy == "zero1") {
      optimizer.reset();
      auto zero_or = ZeroRedundancyOptimizer::Create(*model, comm, make_sgd);
      if (!zero_or.ok()) return zero_or.status();
      zero = std::move(*zero_or);
    }
  }
  torch::optim::Optimizer& opt = zero ? zero->optimizer() : *optimizer;
  const ForwardFn forward = [&](const at::Tensor& x) -> Result<at::Tensor> {
    if (fsdp) return fsdp->Forward(x);
    return model->forward(x);
  };

  SamplerOptions sampler_options;
  sampler_options.dataset_size = train->size();
  sampler_options.num_replicas = env->world_size;
  sampler_options.rank = env->rank;
  sampler_options.seed = static_cast<uint64_t>(flags.seed);
  auto sampler = DistributedSampler::Create(sampler_options);
  if (!sampler.ok()) return sampler.status();

  log("training SmallCnn on " + std::to_string(train->size()) + " Fashion-MNIST images: " +
      std::to_string(env->world_size) + " ranks (" + comm.backend() + "), batch " +
      std::to_string(flags.batch_size) + " per rank, strategy " + flags.strategy +
      (fsdp ? " (FSDP units: " + std::to_string(fsdp->unit_count()) + ")" : std::string()) + ", " +
      std::to_string(flags.epochs) +
      " epochs, " + std::to_string(threads) + " threads per rank");

  auto save = [&]() -> Status {
    if (ckpt_path.empty()) return Status::Ok();
    if (fsdp) return SaveShardedCheckpoint(sharded_dir, *fsdp, opt, position);
    if (!chief) return Status::Ok();
    return SaveCheckpoint(ckpt_path, *model, opt, position);
  };

  bool stop = false;
  double bench_start = 0;
  int64_t bench_samples = 0;
  DdpStats bench_base;
  auto ddp_stats = [&]() { return ddp ? ddp->stats() : DdpStats(); };
  while (position.epoch < flags.epochs && !stop) {
    const std::vector<int64_t> indices = sampler->IndicesFrom(position.epoch, position.epoch_consumed);
    const double epoch_start = Now();
    double loss_sum = 0, correct = 0, seen = 0;
    for (size_t begin = 0; begin < indices.size(); begin += static_cast<size_t>(flags.batch_size)) {
      const size_t count = std::min(indices.size() - begin, static_cast<size_t>(flags.batch_size));
      at::Tensor idx = at::from_blob(const_cast<int64_t*>(indices.data() + begin),
                                     {static_cast<int64_t>(count)}, at::kLong);
      at::Tensor x = train->images.index_select(0, idx).to(device);
      at::Tensor y = train->labels.index_select(0, idx).to(device);

      if (zero) {
        zero->ZeroGrad();
      } else {
        opt.zero_grad();
      }
      auto logits_or = forward(x);
      if (!logits_or.ok()) return logits_or.status();
      at::Tensor logits = *logits_or;
      at::Tensor loss = at::cross_entropy_loss(logits, y);
      CTRUN_RETURN_IF_ERROR(fsdp ? fsdp->Backward(loss) : ddp->Backward(loss));
      if (zero) {
        CTRUN_RETURN_IF_ERROR(zero->Step());
      } else {
        opt.step();
      }

      ++position.step;
      position.epoch_consumed += static_cast<int64_t>(count) * env->world_size;
      position.world_size = env->world_size;
      {
        at::NoGradGuard no_grad;
        loss_sum += loss.item<double>() * static_cast<double>(count);
        correct += logits.argmax(1).eq(y).sum().item<double>();
        seen += static_cast<double>(count);
      }
      if (flags.bench_warmup > 0) {
        if (position.step == flags.bench_warmup) {
          bench_start = Now();
          bench_base = ddp_stats();
          if (fsdp) fsdp->ResetPeaks();
        } else if (position.step > flags.bench_warmup) {
          bench_samples += static_cast<int64_t>(count) * env->world_size;
        }
      }
      if (flags.log_every > 0 && position.step % flags.log_every == 0) {
        char line[160];
        std::snprintf(line, sizeof line, "epoch %lld step %lld: loss %.4f (rank 0, last batch)",
                      static_cast<long long>(position.epoch), static_cast<long long>(position.step),
                      loss.item<double>());
        log(line);
      }
      const bool last_step = flags.max_steps > 0 && position.step >= flags.max_steps;
      if (flags.checkpoint_every > 0 && position.step % flags.checkpoint_every == 0 && !last_step) {
        CTRUN_RETURN_IF_ERROR(save());
      }
      if (last_step) {
        stop = true;
        break;
      }
    }
    if (!stop || position.epoch_consumed >= train->size()) {
      auto evaluated = Evaluate(model, forward, *test, env->rank, env->world_size, device);
      if (!evaluated.ok()) return evaluated.status();
      auto [test_loss, test_correct] = *evaluated;
      auto sums = SumOverRanks(comm, {loss_sum, correct, seen, test_loss, test_correct}, device);
      if (!sums.ok()) return sums.status();
      const auto& v = *sums;
      char line[256];
      std::snprintf(line, sizeof line,
                    "epoch %lld done: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s",
                    static_cast<long long>(position.epoch), v[0] / std::max(1.0, v[2]),
                    v[1] / std::max(1.0, v[2]), v[3] / static_cast<double>(test->size()),
                    v[4] / static_cast<double>(test->size()), Now() - epoch_start);
      log(line);
      ++position.epoch;
      position.epoch_consumed = 0;
    }
    CTRUN_RETURN_IF_ERROR(save());
  }
  if (fsdp && !ckpt_path.empty()) {
    CTRUN_RETURN_IF_ERROR(SaveFullCheckpoint(ckpt_path, "", *model, *fsdp, opt, position));
  }
  CTRUN_RETURN_IF_ERROR(WaitWork(comm.Barrier(), "final barrier"));

  if (flags.bench_warmup > 0 && bench_start > 0) {
    const double seconds = Now() - bench_start;
    DdpStats s = ddp_stats();
    DdpStats window;
    window.comm_span_seconds = s.comm_span_seconds - bench_base.comm_span_seconds;
    window.exposed_seconds = s.exposed_seconds - bench_base.exposed_seconds;
    const double steps = static_cast<double>(position.step - flags.bench_warmup);
    // Parameter + gradient + optimizer-state bytes this rank holds between
    // steps (tensor storage, each once), and at the peak of a step: DDP's
    // buckets hold one more copy of the gradients; FSDP's gathered units and
    // gradient buffers are measured by the core.
    int64_t state_bytes = 0, peak_bytes = 0;
    const int64_t optim_bytes = OptimizerStateBytes(opt);
    if (fsdp) {
      const FsdpMemory m = fsdp->Memory();
      state_bytes = m.shard_param_bytes + m.shard_grad_bytes + optim_bytes;
      peak_bytes = state_bytes + m.peak_gathered_bytes + m.peak_grad_buffer_bytes;
    } else {
      std::vector<at::Tensor> params = model->parameters(), grads;
      for (const auto& p : params) grads.push_back(p.grad());
      state_bytes = StorageBytes(params) + StorageBytes(grads) + optim_bytes;
      peak_bytes = state_bytes + StorageBytes(params);
    }
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    char line[384];
    std::snprintf(line, sizeof line,
                  "BENCH samples_per_s=%.1f hidden_share=%.3f step_ms=%.3f comm_ms=%.3f "
                  "exposed_ms=%.3f steps=%.0f state_bytes=%lld peak_bytes=%lld maxrss_kb=%ld",
                  static_cast<double>(bench_samples) / seconds, window.HiddenShare(),
                  1e3 * seconds / steps, 1e3 * window.comm_span_seconds / steps,
                  1e3 * window.exposed_seconds / steps, steps, static_cast<long long>(state_bytes),
                  static_cast<long long>(peak_bytes), usage.ru_maxrss);
    log(line);
  }
  if (!flags.dump_params.empty()) {
    // Under zero2/fsdp the root's parameters are freed: gather them (all ranks).
    std::vector<at::Tensor> final_params = model->parameters();
    if (fsdp) {
      std::map<std::string, at::Tensor> by_name;
      for (size_t u = 0; u < fsdp->unit_count(); ++u) {
        at::Tensor send = fsdp->shard(u).detach();
        at::Tensor full = at::empty({send.numel() * comm.size()}, send.options());
        CTRUN_RETURN_IF_ERROR(WaitWork(comm.AllGather(send, full), "all-gather of parameters"));
        for (const auto& e : fsdp->layout(u).entries) {
          by_name[e.name] = full.narrow(0, e.offset, e.numel);
        }
      }
      final_params.clear();
      for (const auto& item : model->named_parameters()) final_params.push_back(by_name.at(item.key()));
    }
    if (!chief) final_params.clear();
    std::ofstream out;
    if (chief) out.open(flags.dump_params, std::ios::binary | std::ios::trunc);
    for (const auto& param : final_params) {
      at::Tensor flat = param.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
      out.write(reinterpret_cast<const char*>(flat.data_ptr<float>()),
                static_cast<std::streamsize>(flat.numel() * sizeof(float)));
    }
    if (chief && !out) return Status::IOError("cannot write --dump-params '" + flags.dump_params + "'");
  }
  log("done: " + std::to_string(position.step) + " steps");
  return Status::Ok();
}

}  // namespace
}  // namespace ctrun::trainer

int main(int argc, char** argv) {
  using namespace ctrun::trainer;
#if defined(CTRUN_HAVE_GLOG)
  // Our errors are one line each; c10d's glog copies of them are noise.
  if (std::getenv("GLOG_minloglevel") == nullptr) FLAGS_minloglevel = google::GLOG_FATAL;
#endif
  auto flags = ParseTrainFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) {
    std::fprintf(stderr, "ctrun-fashion-mnist: %s\n", flags.status().message().c_str());
    return 2;
  }
  if (flags->help) {
    std::fputs(TrainUsage().c_str(), stdout);
    return 0;
  }
  ctrun::Status status;
  try {
    status = Run(*flags);
  } catch (const std::exception& error) {
    std::string text = error.what();
    if (auto* c10_error = dynamic_cast<const c10::Error*>(&error)) text = c10_error->what_without_backtrace();
    status = ctrun::Status::Internal(text.substr(0, text.find('\n')));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "ctrun-fashion-mnist: %s\n", status.message().c_str());
    WriteErrorFile(status.message());
    return 1;
  }
  return 0;
}
