// trainer_ddp_check: a helper the Python tests launch.
//
//   trainer_ddp_check allreduce-bench [NUMEL]   (under a launcher's env)
//       rank 0 prints the mean latency of 1000 all-reduces of NUMEL floats.
//   trainer_ddp_check sampler          < "n replicas seed epoch shuffle drop_last consumed" lines
//       prints, per input line and rank, "rank: i i i ..." then a blank line.
//   trainer_ddp_check train [--single] --world W --steps K --batch B [--accum A]
//       [--bucket-cap-mb X] [--compress none|fp16|bf16] [--unused] --out FILE
//       trains the SmallCnn on seeded random data for K steps, each step a
//       global batch of W*A*B rows; rank r takes rows [r*A*B, (r+1)*A*B) as
//       A micro-batches of B (the first A-1 under NoSync). --single trains
//       one process on the whole global batch instead (the reference). The
//       rank 0 (or single) process writes all parameters as float32 to FILE.
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "trainer/apps/fork_server.h"
#include "trainer/parallel/ddp.h"
#include "trainer/comm/dist_env.h"
#include "trainer/data/distributed_sampler.h"
#include "trainer/comm/process_group.h"
#include "trainer/models/small_cnn.h"

namespace ct = ctrun::trainer;

namespace {

struct CheckNetImpl : torch::nn::Module {
  explicit CheckNetImpl(bool with_unused) {
    cnn = register_module("cnn", ct::SmallCnn());
    if (with_unused) unused = register_module("unused", torch::nn::Linear(10, 10));
  }
  at::Tensor forward(const at::Tensor& x) { return cnn->forward(x); }
  ct::SmallCnn cnn{nullptr};
  torch::nn::Linear unused{nullptr};
};
TORCH_MODULE(CheckNet);

int Fail(const ctrun::Status& status) {
  std::fprintf(stderr, "trainer_ddp_check: %s\n", status.message().c_str());
  return 1;
}

int RunSampler() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    ct::SamplerOptions options;
    int64_t epoch = 0, consumed = 0;
    int shuffle = 1, drop_last = 0;
    if (!(in >> options.dataset_size >> options.num_replicas >> options.seed >> epoch >> shuffle >>
          drop_last >> consumed)) {
      continue;
    }
    options.shuffle = shuffle != 0;
    options.drop_last = drop_last != 0;
    for (int r = 0; r < options.num_replicas; ++r) {
      options.rank = r;
      auto sampler = ct::DistributedSampler::Create(options);
      if (!sampler.ok()) return Fail(sampler.status());
      std::cout << r << ":";
      for (int64_t index : sampler->IndicesFrom(epoch, consumed)) std::cout << ' ' << index;
      std::cout << '\n';
    }
    std::cout << '\n';
  }
  return 0;
}

// The train mode's flags (see the top of this file).
struct TrainFlags {
  bool single = false, unused = false;
  int world = 1, steps = 3, batch = 4, accum = 1;
  double cap_mb = 25;
  std::string compress = "none", out_path;
};

ctrun::Status ParseTrainFlags(int argc, char** argv, TrainFlags& f) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (arg == "--single") f.single = true;
    else if (arg == "--unused") f.unused = true;
    else if (arg == "--world") f.world = std::stoi(next());
    else if (arg == "--steps") f.steps = std::stoi(next());
    else if (arg == "--batch") f.batch = std::stoi(next());
    else if (arg == "--accum") f.accum = std::stoi(next());
    else if (arg == "--bucket-cap-mb") f.cap_mb = std::stod(next());
    else if (arg == "--compress") f.compress = next();
    else if (arg == "--out") f.out_path = next();
    else return ctrun::Status::InvalidArgument("unknown flag " + arg);
  }
  return ctrun::Status::Ok();
}

// One rank's process group and DDP wrapper of `net`, from the launcher's env.
struct DdpRank {
  int rank = 0;
  std::shared_ptr<ct::Communicator> comm;
  std::unique_ptr<ct::DistributedDataParallel> ddp;
};

ctrun::Status ConnectDdp(const TrainFlags& f, CheckNet& net, DdpRank& out) {
  auto env = ct::ReadDistEnv(ct::ProcessEnv());
  if (!env.ok()) return env.status();
  if (env->world_size != f.world) return ctrun::Status::InvalidArgument("--world differs from WORLD_SIZE");
  out.rank = env->rank;
  auto connected = ct::ConnectProcessGroup(*env, {});
  if (!connected.ok()) return connected.status();
  out.comm = *connected;
  ct::DdpOptions options;
  options.bucket_cap_mb = f.cap_mb;
  options.first_bucket_cap_mb = std::min(f.cap_mb, 1.0);
  auto compression = ct::ParseGradCompression(f.compress);
  if (!compression.ok()) return compression.status();
  options.compression = *compression;
  auto made = ct::DistributedDataParallel::Create(*net, *out.comm, options);
  if (!made.ok()) return made.status();
  out.ddp = std::move(*made);
  std::fprintf(stderr, "buckets=%zu\n", out.ddp->BucketLayout().size());
  return ctrun::Status::Ok();
}

// This rank's gradients of one step: its A micro-batches of B rows, the
// first A-1 under NoSync.
ctrun::Status BackwardRank(const TrainFlags& f, CheckNet& net, DdpRank& r, const at::Tensor& xs,
                           const at::Tensor& ys) {
  for (int a = 0; a < f.accum; ++a) {
    const int64_t begin = (int64_t{r.rank} * f.accum + a) * f.batch;
    at::Tensor x = xs.narrow(0, begin, f.batch);
    at::Tensor y = ys.narrow(0, begin, f.batch);
    at::Tensor loss = at::cross_entropy_loss(net->forward(x), y) / f.accum;
    ctrun::Status status;
    if (a + 1 < f.accum) {
      ct::DistributedDataParallel::NoSync no_sync(*r.ddp);
      status = r.ddp->Backward(loss);
    } else {
      status = r.ddp->Backward(loss);
    }
    if (!status.ok()) return status;
  }
  return ctrun::Status::Ok();
}

// Every parameter as float32, in order.
ctrun::Status WriteParams(CheckNet& net, const std::string& out_path) {
  std::ofstream out(out_path, std::ios::binary);
  for (const auto& param : net->parameters()) {
    at::Tensor flat = param.detach().contiguous().to(at::kFloat).reshape({-1});
    out.write(reinterpret_cast<const char*>(flat.data_ptr<float>()),
              static_cast<std::streamsize>(flat.numel() * sizeof(float)));
  }
  if (!out) return ctrun::Status::IOError("cannot write " + out_path);
  return ctrun::Status::Ok();
}

int RunTrain(int argc, char** argv) {
  TrainFlags f;
  if (auto parsed = ParseTrainFlags(argc, argv, f); !parsed.ok()) return Fail(parsed);
  at::set_num_threads(1);
  at::manual_seed(7);
  CheckNet net(f.unused);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));

  const int64_t global = int64_t{f.world} * f.accum * f.batch;
  at::Generator data_gen = at::detail::createCPUGenerator(1234);
  at::Tensor xs = at::randn({f.steps, global, 1, 28, 28}, data_gen, at::kFloat);
  at::Tensor ys = at::randint(0, 10, {f.steps, global}, data_gen, at::kLong);

  DdpRank r;
  if (!f.single) {
    if (auto connected = ConnectDdp(f, net, r); !connected.ok()) return Fail(connected);
  }

  for (int step = 0; step < f.steps; ++step) {
    sgd.zero_grad();
    if (f.single) {
      at::Tensor loss = at::cross_entropy_loss(net->forward(xs[step]), ys[step]);
      loss.backward();
    } else if (auto status = BackwardRank(f, net, r, xs[step], ys[step]); !status.ok()) {
      return Fail(status);
    }
    sgd.step();
  }
  if (r.comm) {
    auto status = ct::WaitWork(r.comm->Barrier(), "final barrier");
    if (!status.ok()) return Fail(status);
  }
  if (r.rank == 0) {
    if (auto written = WriteParams(net, f.out_path); !written.ok()) return Fail(written);
  }
  return 0;
}

// Times 1000 in-place all-reduces of `numel` floats (latency of the raw
// process group, to compare with torch.distributed from Python).
int RunAllReduceBench(int64_t numel) {
  at::set_num_threads(1);
  auto env = ct::ReadDistEnv(ct::ProcessEnv());
  if (!env.ok()) return Fail(env.status());
  auto comm = ct::ConnectProcessGroup(*env, {});
  if (!comm.ok()) return Fail(comm.status());
  at::Tensor t = at::ones({numel});
  auto time_n = [&](int n) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      auto status = ct::WaitWork((*comm)->AllReduceSum(t), "all-reduce");
      if (!status.ok()) return -1.0;
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / n;
  };
  time_n(50);
  const double us = time_n(1000);
  if (env->rank == 0) std::printf("c++ allreduce us %.1f\n", us);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ctrun::trainer::ServeForksIfAsked(argc, argv);  // the tests' fast rank starts (fork_server.h)
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "sampler") return RunSampler();
  if (mode == "train") return RunTrain(argc, argv);
  if (mode == "allreduce-bench") return RunAllReduceBench(argc > 2 ? std::stoll(argv[2]) : 80202);
  std::fprintf(stderr, "usage: trainer_ddp_check sampler|train ...\n");
  return 2;
}
