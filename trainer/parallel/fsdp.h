// FullyShardedDataParallel: ZeRO-style sharding of parameters, gradients and
// optimizer state over the ranks of a Communicator (Gloo or NCCL).
//
// The model is run as an ordered list of stages (C++ modules have no forward
// hooks, so FSDP owns the loop that PyTorch's FSDP gets from hooks): each
// stage is a submodule of the root that holds parameters, plus the function
// that runs it. Consecutive stages are grouped into units by the size-based
// wrap policy (wrap_policy.h); each unit has one flat parameter (flat_param.h),
// padded to a multiple of the world size N, of which each rank keeps a float32
// shard: the master weights, and the tensors to hand the optimizer.
//
// Strategies:
//  - kFullShard (ZeRO-3): a unit's full parameters are all-gathered before
//    its forward and freed after it, gathered again before its backward and
//    freed once its gradients exist; gradients are reduce-scattered, so each
//    rank keeps 1/N of parameters, gradients and optimizer state.
//  - kShardGradOp (ZeRO-2): as above, but parameters gathered for forward
//    stay until the unit's backward is done (one all-gather per step).
//  - kNoShard: every rank keeps the whole flat parameter and all-reduces
//    gradients (DDP through the same code).
// With options.replicate (HSDP, hsdp.h), `comm` is one shard group of
// several replicas: gradients are then also averaged across the replicas.
// With `prefetch`, the next unit's all-gather is started (asynchronously)
// before the current unit computes, in forward and in backward, so
// communication overlaps compute; at most two units are gathered at once.
//
// Mixed precision (off by default): parameters are gathered and computed in
// bfloat16, gradients reduced in bfloat16; shards, their gradients and the
// optimizer stay float32. Forward casts its input to bfloat16 and its output
// back to float32. On Gloo, bf16 moves as float16 bits (all-gather and the
// all-to-all behind reduce-scatter) and is summed in float32 locally;
// kNoShard's all-reduce falls back to float32 when the group cannot reduce
// bf16 (torch 1.13's Gloo).
//
// After Create, the root module's parameters are views into gathered buffers
// or empty placeholders: give the optimizer parameters(), not the root's.
// Each unit gathers into one buffer whose memory is freed in place when the
// unit is freed (the storage is kept at 0 bytes and given memory again for
// the next gather, as PyTorch's FSDP does), so the views of the parameters
// autograd saves in forward do not keep a freed unit's memory alive until
// backward. A unit's memory is freed as soon as its gradients exist, before
// its gradient buffers are allocated.
// Gradient accumulation over several backward passes is not supported (each
// FinishGradSync overwrites the shards' .grad).
//
// With offload_params the shards, their gradients and so the optimizer's
// state are in host memory; Memory()'s shard bytes are host bytes then.
//
// Lifetimes: `root`, the stages' modules and `comm` must outlive this object.
// Not copyable. Thread model: one thread (the one running forward/backward).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "trainer/comm/communicator.h"
#include "trainer/parallel/flat_param.h"
#include "trainer/parallel/held_bytes.h"
#include "trainer/parallel/wrap_policy.h"

namespace torch::nn {
class Module;
}
namespace torch::autograd {
struct Node;
}

namespace ctrun::trainer {

enum class ShardingStrategy { kFullShard, kShardGradOp, kNoShard };

// "full_shard" (or "fsdp"), "shard_grad_op" (or "zero2"), "no_shard".
// InvalidArgument otherwise.
Result<ShardingStrategy> ParseShardingStrategy(const std::string& name);

struct FsdpStage {
  std::shared_ptr<torch::nn::Module> module;             // a submodule of the root
  std::function<at::Tensor(const at::Tensor&)> forward;  // runs it
};

struct FsdpOptions {
  ShardingStrategy strategy = ShardingStrategy::kFullShard;
  int64_t min_unit_params = 100000;  // wrap policy threshold
  bool prefetch = true;
  bool mixed_precision = false;      // bf16 compute and reduce, fp32 master
  // CPU offload of parameters (cpu_offload.h, kParams): the shards and their
  // .grad live in host memory (page-locked on CUDA), copied to the device
  // for each all-gather and back after each reduce-scatter. Sharded
  // strategies only.
  bool offload_params = false;
  // HSDP (hsdp.h): the group across which this shard group is replicated,
  // or null (plain FSDP). Parameters and buffers are broadcast from its
  // rank 0 at Create; each shard's reduce-scattered gradient is averaged
  // across it. Must outlive the wrapper.
  Communicator* replicate = nullptr;
};

// Bytes of tensor storage this object owns, by role (optimizer state is the
// optimizer's: see OptimizerStateBytes in optimizer_state.h).
struct FsdpMemory {
  int64_t shard_param_bytes = 0;       // float32 shards (master weights)
  int64_t shard_grad_bytes = 0;        // their .grad
  int64_t gathered_bytes = 0;          // full unit parameters held now
  int64_t peak_gathered_bytes = 0;     // most held at once since ResetPeaks
  int64_t peak_grad_buffer_bytes = 0;  // most full-size unit gradient and
                                       // reduce buffers held at once
  int64_t peak_held_bytes = 0;         // most of both held at once
  int64_t max_unit_bytes = 0;          // the largest unit's full parameters
};

class FullyShardedDataParallel {
 public:
  // Checks the stages, lays out the units, broadcasts parameters and buffers
  // from rank 0, keeps this rank's shards and frees the rest. Returns the
  // wrapper, or:
  //  - InvalidArgument when a parameter that requires grad is in no stage or
  //    in two, a stage's module is not under `root`, a parameter is not
  //    float32, parameters are on more than one device, or the wrap policy
  //    rejects its input;
  //  - Unavailable when the broadcast fails.
  static Result<std::unique_ptr<FullyShardedDataParallel>> Create(torch::nn::Module& root,
                                                                  std::vector<FsdpStage> stages,
                                                                  Communicator& comm,
                                                                  FsdpOptions options = {});
  ~FullyShardedDataParallel();
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  // This rank's float32 shard of each unit, for the optimizer. Their .grad is
  // set by FinishGradSync.
  std::vector<at::Tensor> parameters() const;

  // Runs the stages on `input`, gathering units as it goes. Returns the
  // output (float32 under mixed precision), Unavailable when an all-gather
  // fails, Internal when a stage throws.
  Result<at::Tensor> Forward(const at::Tensor& input);

  // loss.backward() then FinishGradSync(). Unavailable when a collective
  // fails, Internal when backward throws.
  Status Backward(const at::Tensor& loss);

  // Waits for every unit's gradient reduction and sets the shards' .grad to
  // the average over ranks; frees what is still gathered (sharded
  // strategies). Call before optimizer.step(). Unavailable on failure.
  Status FinishGradSync();

  // Frees every gathered unit (sharded strategies) after waiting for
  // gathers in flight. Unavailable on failure.
  Status Reshard();

  // Under pipeline parallelism (the pipeline runs the modules itself,
  // several micro-batches a step: pipeline.h). GatherForStep all-gathers
  // every unit and keeps it gathered until ReduceAccumulatedGrads; in
  // between, the micro-batches' backward passes accumulate into the
  // parameters' .grad as without FSDP (the per-unit reductions that start
  // in backward are held back). ReduceAccumulatedGrads then reduces each
  // unit's accumulated gradient as FinishGradSync does (reduce-scatter,
  // then across replicas), sets the shards' .grad and frees every unit.
  // One all-gather and one reduce-scatter per unit per step: PyTorch FSDP2's
  // behaviour under pipeline parallelism (reshard_after_forward=False). The
  // stage's full parameters and gradients are held during the step, 1/N of
  // everything between steps. Unavailable when a collective fails (the units
  // are freed then).
  Status GatherForStep();
  Status ReduceAccumulatedGrads();

  size_t unit_count() const;
  const FlatLayout& layout(size_t unit) const;
  // The unit's float32 shard (rank's part of the padded flat parameter; the
  // whole padded flat parameter under kNoShard).
  const at::Tensor& shard(size_t unit) const;
  bool sharded() const { return options_.strategy != ShardingStrategy::kNoShard; }
  const FsdpOptions& options() const { return options_; }
  Communicator& comm() { return comm_; }
  // Where the units are gathered and computed (the parameters' device).
  const at::Device& device() const { return device_; }
  // Parameter names per unit, for logs and tests.
  std::vector<std::vector<std::string>> UnitNames() const;

  FsdpMemory Memory() const;
  void ResetPeaks();

 private:
  struct Unit;
  struct StageParams;
  FullyShardedDataParallel(torch::nn::Module& root, std::vector<FsdpStage> stages,
                           Communicator& comm, FsdpOptions options);
  // Create's steps, in order.
  Status Init();
  Result<StageParams> CollectStageParams() const;  // checks the stages
  void ProbeBf16Sum();                              // sets reduce_in_fp32_
  Status FindDevice(const StageParams& stage_params);  // sets device_
  Result<std::unique_ptr<Unit>> MakeUnit(const UnitSpan& span, const StageParams& stage_params);
  Status BroadcastBuffers();
  void AddGradHooks();

  void StartGather(size_t u);
  Status EnsureGathered(size_t u);
  void Install(Unit& unit, const at::Tensor& full);
  void Free(Unit& unit);
  void DropGather(Unit& unit);  // forgets an all-gather in flight or failed
  void OnPreBackward(size_t u);
  void OnGradReady(size_t u, size_t slot);
  void LaunchReadyReductions();
  void LaunchReduction(size_t u);
  Status FinishReduction(Unit& unit);  // waits, sets the shard's .grad, frees buffers
  at::TensorOptions Options(at::ScalarType dtype) const;  // on the parameters' device

  torch::nn::Module& root_;
  std::vector<FsdpStage> stages_;
  Communicator& comm_;
  FsdpOptions options_;
  at::ScalarType compute_dtype_;
  at::Device device_{at::kCPU};
  bool reduce_in_fp32_ = false;        // kNoShard + bf16 on a group without bf16 sums
  // Declared before units_: the units' leases give their bytes back here
  // when the units are destroyed.
  HeldBytes held_bytes_;               // the two below together
  HeldBytes gathered_bytes_{&held_bytes_};     // full unit parameters held or in flight
  HeldBytes grad_buffer_bytes_{&held_bytes_};  // full-size unit gradient and reduce buffers
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators_;
  at::Tensor placeholder_;             // what freed parameters point to
  size_t reduced_ = 0;                 // units launched, from the last one down
  std::deque<size_t> in_flight_;       // units whose reduction is not finished
  bool accumulating_ = false;          // between GatherForStep and ReduceAccumulatedGrads
  Status hook_error_;                  // from a backward hook, reported at finish
  Status start_error_;                 // an all-gather that could not start
};

}  // namespace ctrun::trainer
