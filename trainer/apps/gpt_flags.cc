#include "trainer/apps/gpt_flags.h"

#include <map>

#include "trainer/apps/flag_table.h"
#include "trainer/apps/gpt_ft_flags.h"
#include "trainer/apps/gpt_hsdp_flags.h"
#include "trainer/apps/gpt_precision_flags.h"
#include "trainer/apps/gpt_pipeline_flags.h"

namespace ctrun::trainer {

std::string GptUsage() {
  return R"(ctrun-gpt: a small GPT-style decoder trained on text with tensor, pipeline and
data parallelism on a (pp, dp, tp) device mesh.
Run under a launcher, e.g.
  ctrun --nproc-per-node 8 --no-python build/trainer/apps/ctrun-gpt --mesh pp=2,dp=2,tp=2

  --mesh pp=P,dp=D,tp=T   the mesh; P*D*T = WORLD_SIZE; a missing name is 1
                          (default: dp = WORLD_SIZE)
  --pp-schedule S         1f1b, gpipe or interleaved (default 1f1b)
  --pp-virtual-stages V   interleaved: model chunks per stage, V >= 2; the
                          layers are cut into pp*V chunks, stage s holding
                          chunks s, s+pp, ...; --micro-batches a multiple of
                          pp (default 1)
  --micro-batches N       micro-batches per step and dp replica (default 4)
  --pp-split A,B,...      layers per pipeline stage (default: by count)
  --sequence-parallel     split activations along the sequence outside the
                          tensor-parallel regions (needs --seq-len divisible by tp)
  --layers N --width N --heads N --seq-len N   the model (default 4, 64, 4, 32)
  --global-batch N        sequences per step over all replicas (default 16)
  --strategy S            ddp (the mesh; DDP over dp) or fsdp (full-shard FSDP
                          over all ranks; pure data parallelism only: no pp or
                          tp in --mesh)
  --min-unit-params N     fsdp: parameters per FSDP unit at least (default: one
                          block's, so each block is a unit)
  --dp-shard M            the mesh's dp dimension: none (DDP), full (FSDP,
                          ZeRO-3) or grad-op (ZeRO-2); tp slices are sharded
                          too (default none)
  --dp-shard-size S       with --dp-shard: dp ranks per shard group, dividing
                          dp; dp/S replicas (HSDP) (default: dp, no replicas)
  --recompute P           activation recomputation: none, full (each block
                          recomputed in backward, only its input kept) or
                          selective (only the attention core recomputed);
                          the same gradients, less activation memory
                          (default none)
  --precision P           fp32, or fp16: float16 compute (autocast) with
                          float32 master weights and a dynamic loss scaler
                          (default fp32; --backend nccl only)
  --cpu-offload M         fsdp: none, params (shards, gradients and optimizer
                          state in CPU memory) or optimizer (only the optimizer
                          state and step on the CPU) (default none; nccl only)
  --optimizer O           adam or sgd (default adam)
  --lr X                  learning rate (default 0.003)
  --momentum X            sgd momentum (default 0.9)
  --steps N               optimizer steps in total (default 200)
  --seed N                model init and batch seed (default 0)
  --log-every N           steps between loss lines; 0 = none (default 20)
  --data PATH             a text file or directory (default /usr/share/common-licenses)
  --checkpoint-dir DIR    save per mesh coordinate / resume from DIR (any mesh)
  --checkpoint-every N    steps between checkpoints (default 50)
  --dump-params PREFIX    at the end, dp-0 ranks write their parameter slices to
                          PREFIX.pp<P>.tp<T>.{bin,json}
  --show-schedule         each stage prints the order of its first step
  --threads N             intra-op threads per rank (default 1)
  --store-timeout S       seconds to wait for the store and peers (default 120)
  --backend B             gloo or nccl (default gloo)
  --crash-stage S --crash-at-step K   fault injection (tests): on the first
                          attempt, stage S's ranks SIGKILL themselves before step K
  --ft                    fault tolerance across replica groups, under ctrun
                          --ft-replicas MIN:MAX: pure data parallelism within a
                          group, --micro-batches 1, fp32 (docs/trainer.md)
  --dump-state PATH       --ft: at the end every rank writes its parameters and
                          optimizer state as raw float32 to PATH.<group>.<rank>
)";
}

namespace {

// --strategy: fsdp shards over every rank, so the mesh must be pure dp.
Status CheckStrategy(const GptFlags& flags) {
  if (flags.strategy == "ddp") return Status::Ok();
  if (flags.strategy != "fsdp") {
    return Status::InvalidArgument("--strategy '" + flags.strategy + "': unknown (use ddp or fsdp)");
  }
  if (flags.mesh_shape.pp != 1 || flags.mesh_shape.tp != 1) {
    return Status::InvalidArgument("--strategy fsdp with --mesh " + flags.mesh +
                                   ": fsdp shards over all ranks; drop pp and tp from --mesh or use "
                                   "--strategy ddp");
  }
  return Status::Ok();
}

}  // namespace

Result<GptFlags> ParseGptFlags(const std::vector<std::string>& args) {
  GptFlags flags;
  std::string schedule = "1f1b";
  std::string recompute = "none";
  const std::map<std::string, FlagSetter> table = {
      {"--mesh", TextFlag(&flags.mesh)},
      {"--pp-schedule", TextFlag(&schedule)},
      {"--micro-batches", IntFlag(&flags.micro_batches, 1)},
      {"--pp-virtual-stages", IntFlag(&flags.virtual_stages, 1)},
      {"--pp-split", TextFlag(&flags.pp_split)},
      {"--layers", IntFlag(&flags.layers, 1)},
      {"--width", IntFlag(&flags.width, 1)},
      {"--heads", IntFlag(&flags.heads, 1)},
      {"--seq-len", IntFlag(&flags.seq_len, 1)},
      {"--global-batch", IntFlag(&flags.global_batch, 1)},
      {"--strategy", TextFlag(&flags.strategy)},
      {"--min-unit-params", IntFlag(&flags.min_unit_params, 1)},
      {"--dp-shard", TextFlag(&flags.dp_shard)},
      {"--dp-shard-size", IntFlag(&flags.dp_shard_size, 1)},
      {"--recompute", TextFlag(&recompute)},
      {"--optimizer", TextFlag(&flags.optimizer)},
      {"--precision", TextFlag(&flags.precision)},
      {"--cpu-offload", TextFlag(&flags.cpu_offload)},
      {"--lr", RealFlag(&flags.lr, true)},
      {"--momentum", RealFlag(&flags.momentum, false)},
      {"--steps", IntFlag(&flags.steps, 0)},
      {"--seed", IntFlag(&flags.seed, 0)},
      {"--log-every", IntFlag(&flags.log_every, 0)},
      {"--data", TextFlag(&flags.data)},
      {"--checkpoint-dir", TextFlag(&flags.checkpoint_dir)},
      {"--checkpoint-every", IntFlag(&flags.checkpoint_every, 1)},
      {"--dump-params", TextFlag(&flags.dump_params)},
      {"--threads", IntFlag(&flags.threads, 1)},
      {"--store-timeout", IntFlag(&flags.store_timeout_s, 1)},
      {"--backend", TextFlag(&flags.backend)},
      {"--crash-stage", IntFlag(&flags.crash_stage, 0)},
      {"--crash-at-step", IntFlag(&flags.crash_at_step, 0)},
      {"--dump-state", TextFlag(&flags.dump_state)},
  };
  CTRUN_RETURN_IF_ERROR(ParseFlagTable(args, table,
                                       {{"--sequence-parallel", &flags.sequence_parallel},
                                        {"--show-schedule", &flags.show_schedule},
                                        {"--ft", &flags.ft}},
                                       &flags.help));
  if (flags.help) return flags;
  auto mesh = ParseMeshShape(flags.mesh);
  if (!mesh.ok()) return mesh.status();
  flags.mesh_shape = *mesh;
  if (flags.mesh.find("dp=") == std::string::npos) flags.mesh_shape.dp = 0;  // = WORLD_SIZE / (pp*tp)
  auto parsed_schedule = ParsePipeSchedule(schedule);
  if (!parsed_schedule.ok()) return parsed_schedule.status();
  flags.schedule = *parsed_schedule;
  CTRUN_RETURN_IF_ERROR(CheckPipelineFlags(flags));
  auto parsed_recompute = ParseRecomputePolicy(recompute);
  if (!parsed_recompute.ok()) return parsed_recompute.status();
  flags.recompute = *parsed_recompute;
  if (flags.width % flags.heads != 0) {
    return Status::InvalidArgument("--width " + std::to_string(flags.width) + " is not divisible by --heads " +
                                   std::to_string(flags.heads) + " (each head needs width/heads features)");
  }
  if (flags.optimizer != "adam" && flags.optimizer != "sgd") {
    return Status::InvalidArgument("--optimizer '" + flags.optimizer + "': unknown (use adam or sgd)");
  }
  CTRUN_RETURN_IF_ERROR(CheckStrategy(flags));
  CTRUN_RETURN_IF_ERROR(CheckDpShardFlags(flags));
  if (flags.backend != "gloo" && flags.backend != "nccl") {
    return Status::InvalidArgument("--backend '" + flags.backend + "': unknown (use gloo or nccl)");
  }
  CTRUN_RETURN_IF_ERROR(CheckPrecisionFlags(flags));
  CTRUN_RETURN_IF_ERROR(CheckGptFtFlags(flags));
  if (flags.sequence_parallel && flags.seq_len % flags.mesh_shape.tp != 0) {
    return Status::InvalidArgument("--sequence-parallel: --seq-len " + std::to_string(flags.seq_len) +
                                   " is not divisible by tp=" + std::to_string(flags.mesh_shape.tp) +
                                   " (each tp rank holds seq-len/tp positions)");
  }
  if (!flags.pp_split.empty()) {
    auto split = ParseStageSplit(flags.pp_split, flags.mesh_shape.pp, static_cast<int>(flags.layers));
    if (!split.ok()) return split.status();
  }
  return flags;
}

}  // namespace ctrun::trainer
