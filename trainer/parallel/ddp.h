// DistributedDataParallel: data-parallel gradient averaging for a libtorch
// module, the way PyTorch's DDP does it.
//
// - On construction, parameters and buffers are broadcast from rank 0 so all
//   ranks start equal.
// - Parameters that require grad are grouped into buckets in reverse
//   registration order (the order backward usually produces them), the first
//   bucket capped at 1 MiB and the others at bucket_cap_mb, never mixing
//   dtypes or devices.
// - A post-hook on each parameter's AccumulateGrad node copies the fresh
//   gradient into its bucket's flat buffer; once a bucket's last gradient is
//   in, that bucket's all-reduce starts at once (asynchronously), so
//   communication overlaps the rest of backward. Buckets start strictly in
//   index order on every rank, which keeps c10d's collective order equal.
// - FinishGradSync() (or Backward()) waits for every bucket; the averages
//   are left in the buckets, and each parameter's .grad becomes a tensor over
//   its slot of its bucket (PyTorch's gradient_as_bucket_view=True). From
//   the second step on, backward accumulates straight into the bucket (the
//   optimizer's zero_grad() zeroes it in place): no gradient is copied in
//   or out. A .grad the caller replaces is copied in, then swapped back for
//   the slot's tensor.
// - Unused parameters (no gradient this backward): their slot is all-reduced
//   as zeros (or as the .grad already accumulated under NoSync), so a
//   parameter used on some ranks only gets sum/world_size, as in PyTorch's
//   find_unused_parameters=True; one unused on every rank gets a zero .grad
//   (PyTorch would leave it undefined). No error is raised.
// - Compression: kFp16/kBf16 cast each bucket (already divided by world size)
//   before the all-reduce and back after; the result is rounded to that type.
//   kTopk (Deep Gradient Compression, topk_compression.h) keeps momentum and
//   a residual per bucket slot, all-gathers each rank's top entries (values
//   and indices) instead of all-reducing, and leaves the averaged sparse sum
//   in .grad, momentum already applied: the optimizer must not add its own.
//   Its first options.topk.warmup_steps synced steps are dense.
//
// Lifetimes: `module` and `comm` must outlive this object. Not copyable.
// Thread model: use from the thread that runs forward/backward (CPU autograd
// runs hooks on that thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "trainer/comm/communicator.h"
#include "trainer/parallel/topk_compression.h"

namespace torch::nn {
class Module;
}
namespace torch::autograd {
struct Node;
}

namespace ctrun::trainer {

enum class GradCompression { kNone, kFp16, kBf16, kTopk };

// Parses "none", "fp16" or "bf16"; InvalidArgument otherwise (top-k has a
// density: the caller sets kTopk and DdpOptions::topk itself).
Result<GradCompression> ParseGradCompression(const std::string& name);

struct DdpOptions {
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;  // PyTorch's _DEFAULT_FIRST_BUCKET_BYTES
  GradCompression compression = GradCompression::kNone;
  TopkOptions topk;  // under kTopk
};

// Communication timing summed over synced backward passes.
struct DdpStats {
  int64_t synced_steps = 0;
  double comm_span_seconds = 0;   // first bucket launch -> all buckets done
  double exposed_seconds = 0;     // FinishGradSync start -> all buckets done
  // Gradient payload this rank put into collectives (its own all-reduce
  // buffers, or its top-k values + indices), and what plain float32
  // all-reduces of the same buckets would have put in.
  int64_t wire_bytes = 0;
  int64_t dense_bytes = 0;
  // Share of the all-reduce span that overlapped backward (0..1).
  double HiddenShare() const {
    return comm_span_seconds > 0 ? 1.0 - exposed_seconds / comm_span_seconds : 0.0;
  }
};

// Under kTopk, one rank's DGC state (topk_compression.h), as checkpoints
// save and restore it (trainer/checkpoint/topk_state.h): for each parameter
// that requires grad, in registration order, its name and its momentum u and
// residual v shaped like it, and the synced steps counted toward the dense
// warm-up. From topk_state(), the tensors are views of the buckets' state:
// copying into them restores it.
struct TopkState {
  int64_t synced_steps = 0;
  std::vector<std::string> names;
  std::vector<at::Tensor> momentum, residual;
};

class DistributedDataParallel {
 public:
  // Broadcasts `module`'s parameters and buffers from rank 0 and installs the
  // gradient hooks. Returns the wrapper, or:
  //  - InvalidArgument when bucket_cap_mb <= 0 or the module has no parameter
  //    that requires grad;
  //  - Unavailable when the broadcast fails (a peer died).
  static Result<std::unique_ptr<DistributedDataParallel>> Create(torch::nn::Module& module,
                                                                 Communicator& comm,
                                                                 DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Runs loss.backward() and, unless inside NoSync, FinishGradSync().
  // Returns OK, Unavailable when an all-reduce fails, or Internal when
  // backward itself throws (the message carries torch's first line).
  Status Backward(const at::Tensor& loss);

  // Waits for every bucket of this backward and writes averaged gradients to
  // .grad. Call after backward, before the optimizer step. A no-op (OK)
  // inside NoSync. Returns Unavailable when an all-reduce fails.
  Status FinishGradSync();

  // While a NoSync object lives, backward passes only accumulate local
  // gradients (no communication); the next synced backward all-reduces the
  // accumulated sum. Use for gradient accumulation.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.sync_) {
      ddp.sync_ = false;
    }
    ~NoSync() { ddp_.sync_ = previous_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };

  // Broadcasts buffers (e.g. BatchNorm statistics) from rank 0. PyTorch does
  // this before each forward; call it where you want that. Unavailable on
  // failure.
  Status SyncBuffers();

  // Parameter indices (registration order) per bucket, bucket 0 first.
  std::vector<std::vector<size_t>> BucketLayout() const;
  // Each bucket's flat gradient buffer (after the first synced step, the
  // parameters' .grad are views of these), for memory accounting.
  std::vector<at::Tensor> Buckets() const;
  const DdpStats& stats() const { return stats_; }

  // kTopk: this rank's top-k state (views, see TopkState); without top-k,
  // no names. set_topk_synced_steps restores the warm-up's step count (the
  // STATS counters are this process's own and stay as they are).
  TopkState topk_state() const;
  void set_topk_synced_steps(int64_t steps) { topk_synced_steps_ = steps; }

 private:
  struct Bucket;
  DistributedDataParallel(torch::nn::Module& module, Communicator& comm, DdpOptions options);
  Status Init();
  void OnGradReady(size_t param_index);
  void LaunchReadyBuckets();
  void Launch(Bucket& bucket);
  void LaunchTopk(Bucket& bucket);
  Status CheckTopk() const;

  torch::nn::Module& module_;
  Communicator& comm_;
  DdpOptions options_;
  std::vector<at::Tensor> params_;        // requiring grad, registration order
  std::vector<size_t> bucket_of_;         // param index -> bucket index
  std::vector<size_t> slot_of_;           // param index -> slot in bucket
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators_;
  size_t next_launch_ = 0;                // buckets below this are in flight
  bool sync_ = true;
  bool second_grad_ = false;              // misuse seen since the last sync
  Status launch_error_;                   // an all-reduce that failed to start
  double first_launch_ = 0;
  DdpStats stats_;
  int64_t topk_synced_steps_ = 0;         // synced steps toward the top-k warm-up
};

}  // namespace ctrun::trainer
