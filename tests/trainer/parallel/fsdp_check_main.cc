// trainer_fsdp_check: a helper the FSDP Python tests launch.
//
//   trainer_fsdp_check train --strategy S --steps K --global G --out FILE
//       [--start-step S0] [--mixed] [--no-prefetch] [--min-unit N] [--adam]
//       [--load-dir D] [--save-dir D] [--save-full CKPT --save-model MODEL]
//     S: single (one process, no communicator: the reference), ddp, zero1,
//     full_shard, shard_grad_op, no_shard. Trains SmallCnn (seed 7) with
//     SGD(0.05, momentum 0.9) (or Adam(1e-3)) for steps S0..S0+K-1; step s
//     uses a global batch of G random images (seeded by s); rank r of W
//     takes rows [r*G/W, (r+1)*G/W). --load-dir/--save-dir: FSDP sharded
//     checkpoint before/after. --save-full: consolidated checkpoint + plain
//     model. Rank 0 writes all parameters (float32, SmallCnn order) to FILE;
//     every rank prints "MEM rank=R state=... params=... peak_params=...
//     max_unit=..." on stderr (bytes, see docs/trainer.md).
//   trainer_fsdp_check load-full --ckpt CKPT --model MODEL --out FILE
//     loads CKPT with LoadCheckpoint into a plain SmallCnn + SGD, and MODEL
//     with torch::load into another; fails unless both agree; writes FILE.
#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "trainer/apps/fork_server.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/parallel/ddp.h"
#include "trainer/comm/dist_env.h"
#include "trainer/parallel/fsdp.h"
#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/comm/process_group.h"
#include "trainer/checkpoint/sharded_checkpoint.h"
#include "trainer/models/small_cnn.h"
#include "trainer/models/small_cnn_stages.h"
#include "trainer/parallel/zero_optimizer.h"

namespace ct = ctrun::trainer;

namespace {

int Fail(const ctrun::Status& status) {
  std::fprintf(stderr, "trainer_fsdp_check: %s\n", status.message().c_str());
  return 1;
}

// Storage bytes, each storage once (ZeRO-1's parameters share one).
int64_t Bytes(const std::vector<at::Tensor>& tensors) {
  std::set<const void*> seen;
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (t.defined() && seen.insert(t.storage().data()).second) {
      total += static_cast<int64_t>(t.storage().nbytes());
    }
  }
  return total;
}

std::vector<at::Tensor> Grads(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.grad());
  return out;
}

ctrun::Status WriteParams(const std::string& path, const std::vector<at::Tensor>& params) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& param : params) {
    at::Tensor flat = param.detach().contiguous().to(at::kFloat).reshape({-1});
    out.write(reinterpret_cast<const char*>(flat.data_ptr<float>()),
              static_cast<std::streamsize>(flat.numel() * sizeof(float)));
  }
  return out ? ctrun::Status::Ok() : ctrun::Status::IOError("cannot write " + path);
}

// The full parameters of an FSDP model, in the root's order (collective).
ctrun::Result<std::vector<at::Tensor>> FullParams(ct::FullyShardedDataParallel& fsdp,
                                                  torch::nn::Module& root) {
  std::map<std::string, at::Tensor> by_name;
  for (size_t u = 0; u < fsdp.unit_count(); ++u) {
    at::Tensor full = fsdp.shard(u).detach();
    if (fsdp.sharded()) {
      at::Tensor send = full;
      full = at::empty({send.numel() * fsdp.comm().size()}, send.options());
      CTRUN_RETURN_IF_ERROR(ct::WaitWork(fsdp.comm().AllGather(send, full), "all-gather"));
    }
    for (const auto& e : fsdp.layout(u).entries) by_name[e.name] = full.narrow(0, e.offset, e.numel).view(e.shape);
  }
  std::vector<at::Tensor> out;
  for (const auto& item : root.named_parameters(true)) out.push_back(by_name.at(item.key()));
  return out;
}

// The train command's flags (see the top of this file).
struct TrainArgs {
  std::string strategy = "single", out_path, load_dir, save_dir, save_full, save_model;
  int steps = 3, start = 0, global = 8;
  int64_t min_unit = 1000;
  bool mixed = false, prefetch = true, adam = false;
};

ctrun::Result<TrainArgs> ParseTrainArgs(int argc, char** argv) {
  TrainArgs a;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (arg == "--strategy") a.strategy = next();
    else if (arg == "--steps") a.steps = std::stoi(next());
    else if (arg == "--start-step") a.start = std::stoi(next());
    else if (arg == "--global") a.global = std::stoi(next());
    else if (arg == "--min-unit") a.min_unit = std::stoll(next());
    else if (arg == "--mixed") a.mixed = true;
    else if (arg == "--no-prefetch") a.prefetch = false;
    else if (arg == "--adam") a.adam = true;
    else if (arg == "--load-dir") a.load_dir = next();
    else if (arg == "--save-dir") a.save_dir = next();
    else if (arg == "--save-full") a.save_full = next();
    else if (arg == "--save-model") a.save_model = next();
    else if (arg == "--out") a.out_path = next();
    else return ctrun::Status::InvalidArgument("unknown flag " + arg);
  }
  return a;
}

// One process's model under the chosen strategy. Members are destroyed in
// reverse: the wrappers before the model, the model before the group.
struct Trainee {
  int rank = 0, world = 1;
  std::shared_ptr<ct::Communicator> comm;  // null for "single"
  ct::SmallCnn net{nullptr};
  std::unique_ptr<ct::DistributedDataParallel> ddp;
  std::unique_ptr<ct::ZeroRedundancyOptimizer> zero;
  std::unique_ptr<ct::FullyShardedDataParallel> fsdp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

// FSDP around the model, its optimizer, and --load-dir's checkpoint.
ctrun::Status WrapFsdp(const TrainArgs& a, Trainee& t,
                       const ct::ZeroRedundancyOptimizer::OptimizerFactory& make_optimizer) {
  auto parsed = ct::ParseShardingStrategy(a.strategy);
  if (!parsed.ok()) return parsed.status();
  ct::FsdpOptions options;
  options.strategy = *parsed;
  options.min_unit_params = a.min_unit;
  options.prefetch = a.prefetch;
  options.mixed_precision = a.mixed;
  auto made = ct::FullyShardedDataParallel::Create(*t.net, ct::SmallCnnStages(*t.net), *t.comm, options);
  if (!made.ok()) return made.status();
  t.fsdp = std::move(*made);
  t.optimizer = make_optimizer(t.fsdp->parameters());
  std::fprintf(stderr, "units=%zu\n", t.fsdp->unit_count());
  if (a.load_dir.empty()) return ctrun::Status::Ok();
  auto loaded = ct::LoadShardedCheckpoint(a.load_dir, *t.fsdp, *t.optimizer);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->has_value()) return ctrun::Status::NotFound("no checkpoint in " + a.load_dir);
  std::fprintf(stderr, "loaded step=%lld saved_world=%lld\n", static_cast<long long>((*loaded)->step),
               static_cast<long long>((*loaded)->world_size));
  return ctrun::Status::Ok();
}

// The seeded model, the group (unless "single"), the wrapper and optimizer.
ctrun::Status SetUpTrainee(const TrainArgs& a, Trainee& t) {
  at::set_num_threads(1);
  at::manual_seed(7);
  t.net = ct::SmallCnn();
  const bool adam = a.adam;
  ct::ZeroRedundancyOptimizer::OptimizerFactory make_optimizer =
      [adam](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
    if (adam) return std::make_unique<torch::optim::Adam>(std::move(params), torch::optim::AdamOptions(1e-3));
    return std::make_unique<torch::optim::SGD>(std::move(params), torch::optim::SGDOptions(0.05).momentum(0.9));
  };
  if (a.strategy != "single") {
    auto env = ct::ReadDistEnv(ct::ProcessEnv());
    if (!env.ok()) return env.status();
    t.rank = env->rank;
    t.world = env->world_size;
    auto connected = ct::ConnectProcessGroup(*env, {});
    if (!connected.ok()) return connected.status();
    t.comm = *connected;
  }
  if (a.strategy == "ddp" || a.strategy == "zero1") {
    auto made = ct::DistributedDataParallel::Create(*t.net, *t.comm);
    if (!made.ok()) return made.status();
    t.ddp = std::move(*made);
    if (a.strategy == "zero1") {
      auto z = ct::ZeroRedundancyOptimizer::Create(*t.net, *t.comm, make_optimizer);
      if (!z.ok()) return z.status();
      t.zero = std::move(*z);
    } else {
      t.optimizer = make_optimizer(t.net->parameters());
    }
    return ctrun::Status::Ok();
  }
  if (a.strategy == "single") {
    t.optimizer = make_optimizer(t.net->parameters());
    return ctrun::Status::Ok();
  }
  return WrapFsdp(a, t, make_optimizer);
}

// Steps start..start+steps-1, each on its seeded global batch's rows of this rank.
ctrun::Status TrainSteps(const TrainArgs& a, Trainee& t) {
  const int64_t rows = a.global / t.world;
  for (int step = a.start; step < a.start + a.steps; ++step) {
    at::Generator gen = at::detail::createCPUGenerator(1000 + static_cast<uint64_t>(step));
    at::Tensor xs = at::randn({a.global, 1, 28, 28}, gen, at::kFloat);
    at::Tensor ys = at::randint(0, 10, {a.global}, gen, at::kLong);
    at::Tensor x = xs.narrow(0, t.rank * rows, rows);
    at::Tensor y = ys.narrow(0, t.rank * rows, rows);
    if (t.zero) t.zero->ZeroGrad(); else t.optimizer->zero_grad();
    if (t.fsdp) {
      auto logits = t.fsdp->Forward(x);
      if (!logits.ok()) return logits.status();
      CTRUN_RETURN_IF_ERROR(t.fsdp->Backward(at::cross_entropy_loss(*logits, y)));
    } else {
      at::Tensor loss = at::cross_entropy_loss(t.net->forward(x), y);
      if (t.ddp) {
        CTRUN_RETURN_IF_ERROR(t.ddp->Backward(loss));
      } else {
        loss.backward();
      }
    }
    if (t.zero) {
      CTRUN_RETURN_IF_ERROR(t.zero->Step());
    } else {
      t.optimizer->step();
    }
  }
  return ctrun::Status::Ok();
}

// FSDP: the MEM line, --save-dir and --save-full; returns the full
// parameters (collective).
ctrun::Result<std::vector<at::Tensor>> FinishFsdp(const TrainArgs& a, Trainee& t) {
  const ct::FsdpMemory m = t.fsdp->Memory();
  const int64_t optim = ct::OptimizerStateBytes(*t.optimizer);
  std::fprintf(stderr, "MEM rank=%d state=%lld params=%lld peak_params=%lld max_unit=%lld grad_buffers=%lld\n",
               t.rank, static_cast<long long>(m.shard_param_bytes + m.shard_grad_bytes + optim),
               static_cast<long long>(m.shard_param_bytes),
               static_cast<long long>(m.shard_param_bytes + m.peak_gathered_bytes),
               static_cast<long long>(m.max_unit_bytes), static_cast<long long>(m.peak_grad_buffer_bytes));
  const ct::TrainPosition position{.step = a.start + a.steps, .epoch = 0, .epoch_consumed = 0,
                                   .world_size = t.world, .seed = 7};
  if (!a.save_dir.empty()) {
    CTRUN_RETURN_IF_ERROR(ct::SaveShardedCheckpoint(a.save_dir, *t.fsdp, *t.optimizer, position));
  }
  if (!a.save_full.empty()) {
    CTRUN_RETURN_IF_ERROR(ct::SaveFullCheckpoint(a.save_full, a.save_model, *t.net, *t.fsdp, *t.optimizer, position));
  }
  return FullParams(*t.fsdp, *t.net);
}

int RunTrain(int argc, char** argv) {
  auto args = ParseTrainArgs(argc, argv);
  if (!args.ok()) return Fail(args.status());
  const TrainArgs& a = *args;
  Trainee t;
  ctrun::Status status = SetUpTrainee(a, t);
  if (status.ok()) status = TrainSteps(a, t);
  if (!status.ok()) return Fail(status);

  std::vector<at::Tensor> params = t.net->parameters();
  if (t.fsdp) {
    auto full = FinishFsdp(a, t);
    if (!full.ok()) return Fail(full.status());
    params = *full;
  } else {
    const int64_t optim = ct::OptimizerStateBytes(t.zero ? t.zero->optimizer() : *t.optimizer);
    std::fprintf(stderr, "MEM rank=%d state=%lld params=%lld\n", t.rank,
                 static_cast<long long>(Bytes(params) + Bytes(Grads(params)) + optim),
                 static_cast<long long>(Bytes(params)));
  }
  if (t.comm) {
    status = ct::WaitWork(t.comm->Barrier(), "final barrier");
    if (!status.ok()) return Fail(status);
  }
  if (t.rank == 0) {
    status = WriteParams(a.out_path, params);
    if (!status.ok()) return Fail(status);
  }
  return 0;
}

int RunLoadFull(int argc, char** argv) {
  std::string ckpt, model_path, out_path;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--ckpt") ckpt = argv[i + 1];
    else if (arg == "--model") model_path = argv[i + 1];
    else if (arg == "--out") out_path = argv[i + 1];
  }
  ct::SmallCnn a, b;
  torch::optim::SGD sgd(a->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  auto loaded = ct::LoadCheckpoint(ckpt, *a, sgd);
  if (!loaded.ok()) return Fail(loaded.status());
  if (!loaded->has_value()) return Fail(ctrun::Status::NotFound(ckpt + " not found"));
  try {
    torch::load(b, model_path);
  } catch (const std::exception& error) {
    return Fail(ctrun::Status::InvalidArgument(std::string("torch::load: ") + error.what()));
  }
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    if (!at::equal(pa[i], pb[i])) return Fail(ctrun::Status::Internal("checkpoint and model differ"));
  }
  std::fprintf(stderr, "loaded step=%lld momentum_states=%zu\n", static_cast<long long>((*loaded)->step),
               sgd.state().size());
  auto status = WriteParams(out_path, pa);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace

int main(int argc, char** argv) {
  ctrun::trainer::ServeForksIfAsked(argc, argv);  // the tests' fast rank starts (fork_server.h)
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "train") return RunTrain(argc, argv);
  if (mode == "load-full") return RunLoadFull(argc, argv);
  std::fprintf(stderr, "usage: trainer_fsdp_check train|load-full ...\n");
  return 2;
}
