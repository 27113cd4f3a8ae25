// GptFlags: the command line of ctrun-gpt, parsed and checked (everything
// that can be checked without the world size: the mesh against WORLD_SIZE
// is CheckMeshShape's, at start).
//
// ParseGptFlags is the only reader of argv for that binary. Plain data, no
// torch, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "trainer/comm/mesh_shape.h"
#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/parallel/recompute_policy.h"

namespace ctrun::trainer {

struct GptFlags {
  std::string mesh;                 // "" = pure data parallel (dp = WORLD_SIZE)
  MeshShape mesh_shape;             // parsed --mesh (dp 0 = WORLD_SIZE)
  PipeSchedule schedule = PipeSchedule::k1F1B;
  int64_t virtual_stages = 1;       // --pp-virtual-stages: model chunks a stage (interleaved)
  int64_t micro_batches = 4;
  std::string pp_split;             // "" = by layer count
  bool sequence_parallel = false;
  int64_t layers = 4;
  int64_t width = 64;
  int64_t heads = 4;
  int64_t seq_len = 32;
  int64_t global_batch = 16;        // sequences per step, all dp replicas
  // "ddp" (the mesh, DDP over dp) or "fsdp" (full-shard FSDP over all
  // ranks: pure data parallelism only, one unit per block; no checkpoints).
  std::string strategy = "ddp";
  int64_t min_unit_params = 0;      // fsdp wrap threshold; 0 = one block's size
  // FSDP/ZeRO on the mesh's dp dimension (HSDP; gpt_hsdp_flags.h): none
  // (DDP over dp), full (ZeRO-3) or grad-op (ZeRO-2), sharded within groups
  // of dp_shard_size dp ranks (0 = all of dp) and replicated across them.
  std::string dp_shard = "none";
  int64_t dp_shard_size = 0;
  // Activation recomputation per block: none, full or selective (ddp only).
  RecomputePolicy recompute = RecomputePolicy::kNone;
  // fp32, or fp16: autocast to float16 with a dynamic loss scaler
  // (gpt_precision.h); GPU (nccl) only.
  std::string precision = "fp32";
  // FSDP's CPU offload: none, params or optimizer (parallel/cpu_offload.h);
  // --strategy fsdp with nccl only.
  std::string cpu_offload = "none";
  std::string optimizer = "adam";   // adam or sgd
  double lr = 3e-3;
  double momentum = 0.9;            // sgd
  int64_t steps = 200;
  int64_t seed = 0;
  int64_t log_every = 20;
  std::string data;                 // "" = the Debian license texts
  std::string checkpoint_dir;       // "" = no checkpoints
  int64_t checkpoint_every = 50;
  std::string dump_params;          // prefix: dp-0 ranks write their shards
  bool show_schedule = false;       // print each stage's executed order once
  int64_t threads = 1;              // intra-op threads per rank
  int64_t store_timeout_s = 120;
  std::string backend = "gloo";
  // Fault injection for tests: on the first attempt, the ranks of stage
  // crash_stage kill themselves with SIGKILL before step crash_at_step.
  int64_t crash_stage = -1;
  int64_t crash_at_step = 0;
  // --ft: fault tolerance across replica groups under ctrun --ft-replicas
  // (gpt_ft.h; gpt_ft_flags.h says what it allows); --dump-state: its output.
  bool ft = false;
  std::string dump_state;
  bool help = false;
};

std::string GptUsage();

// Parses `args` (argv without the program name). Returns the flags, or
// InvalidArgument naming the flag and the fix.
Result<GptFlags> ParseGptFlags(const std::vector<std::string>& args);

}  // namespace ctrun::trainer
