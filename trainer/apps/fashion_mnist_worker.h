// Worker: what one rank of ctrun-fashion-mnist trains with (environment,
// data, process group, SmallCnn, its DDP/ZeRO-1/FSDP wrapper, optimizer,
// resume position, sampler), and SetUp, which makes it all in order.
//
// Lifetimes: `flags` must outlive the Worker. Members are made in
// declaration order and destroyed in reverse: the wrappers before the model,
// the model before the group. Not copyable. Thread model: one thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "trainer/apps/preempt_save.h"
#include "trainer/apps/train_flags.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/dist_env.h"
#include "trainer/data/distributed_sampler.h"
#include "trainer/data/fashion_mnist.h"
#include "trainer/models/small_cnn.h"
#include "trainer/parallel/ddp.h"
#include "trainer/parallel/fsdp.h"
#include "trainer/parallel/zero_optimizer.h"

namespace ctrun::trainer {

using ForwardFn = std::function<Result<at::Tensor>(const at::Tensor&)>;

struct Worker {
  explicit Worker(const TrainFlags& f) : flags(f) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Prints `line` on rank 0.
  void Log(const std::string& line) const {
    if (chief) std::printf("%s\n", line.c_str()), std::fflush(stdout);
  }
  // The optimizer to step: ZeRO-1's under zero1.
  torch::optim::Optimizer& opt() { return zero ? zero->optimizer() : *optimizer; }
  // The model's forward, through FSDP under zero2/fsdp. Valid while the
  // Worker lives.
  ForwardFn Forward() {
    return [this](const at::Tensor& x) -> Result<at::Tensor> {
      if (fsdp) return fsdp->Forward(x);
      return model->forward(x);
    };
  }
  DdpStats ddp_stats() const { return ddp ? ddp->stats() : DdpStats(); }
  // `values` summed over ranks (on `device`: NCCL reduces GPU tensors only).
  // Unavailable when the all-reduce fails.
  Result<std::vector<double>> SumOverRanks(const std::vector<double>& values);

  const TrainFlags& flags;
  DistEnv env;
  bool chief = false;       // rank 0
  int threads = 1;          // intra-op threads
  ImageDataset train, test;
  std::shared_ptr<Communicator> comm;
  at::Device device{at::kCPU};
  SmallCnn model{nullptr};  // made after the seed is set
  std::unique_ptr<FullyShardedDataParallel> fsdp;     // zero2/fsdp
  std::unique_ptr<torch::optim::Optimizer> optimizer;  // null under zero1
  TrainPosition position;
  bool resumed = false;     // a checkpoint was loaded (position.world_size: its world)
  std::string ckpt_path;    // <dir>/checkpoint.pt, or empty without --checkpoint-dir
  // zero2/fsdp: sharded checkpoints in <dir>/sharded (any world size), and a
  // consolidated checkpoint.pt (the DDP format) when training ends.
  std::string sharded_dir;
  std::unique_ptr<DistributedDataParallel> ddp;       // ddp/zero1
  std::unique_ptr<ZeroRedundancyOptimizer> zero;      // zero1
  std::optional<DistributedSampler> sampler;
  // Preemption (preempt_save.h): the check when CTRUN_PREEMPT_FILE is set
  // (null otherwise, and always under --ft), and whether the ranks stopped
  // on a notice.
  std::unique_ptr<PreemptCheck> preempt;
  PreemptOutcome preempted = PreemptOutcome::kNone;
};

// Reads the environment, sets the thread count, loads the data (before
// anything is written), joins the process group, makes the seeded model and
// its wrapper and optimizer, resumes from --checkpoint-dir when it holds a
// checkpoint and checks that every rank resumed from the same step,
// restores the top-k state of each rank (topk_state.h) under
// --grad-compression topk, and makes the sampler. Returns OK, or the first failure: InvalidArgument (bad
// flags or environment, a checkpoint saved with another seed, zero1 with
// --checkpoint-dir), NotFound (no dataset, no checkpoint directory),
// FailedPrecondition (ranks at different steps), Unavailable (the group),
// IOError.
Status SetUp(Worker& w);

}  // namespace ctrun::trainer
