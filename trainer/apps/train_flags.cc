#include "trainer/apps/train_flags.h"

#include <map>
#include <string_view>

#include "trainer/apps/flag_table.h"

namespace ctrun::trainer {
namespace {

constexpr std::string_view kTopkPrefix = "topk:";

// --grad-compression: none/fp16/bf16, or topk:D with 0 < D <= 1 (sets
// flags.topk_density).
Status CheckGradCompression(TrainFlags& flags) {
  const std::string& spec = flags.grad_compression;
  if (spec == "none" || spec == "fp16" || spec == "bf16") return Status::Ok();
  if (spec.rfind("topk", 0) != 0) {
    return Status::InvalidArgument("--grad-compression '" + spec +
                                   "': unknown (use none, fp16 or bf16, or topk:D with D in (0, 1], "
                                   "e.g. topk:0.01)");
  }
  const std::string value = spec.rfind(kTopkPrefix, 0) == 0 ? spec.substr(kTopkPrefix.size()) : "";
  size_t used = 0;
  double density = 0;
  try {
    density = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (value.empty() || used != value.size() || !(density > 0 && density <= 1)) {
    return Status::InvalidArgument("--grad-compression '" + spec +
                                   "': top-k needs a density D in (0, 1], e.g. topk:0.01");
  }
  flags.topk_density = density;
  return Status::Ok();
}

}  // namespace

std::string TrainUsage() {
  return R"(ctrun-fashion-mnist: data-parallel training of a small CNN on Fashion-MNIST.
Run under a launcher, e.g.  ctrun --nproc-per-node 4 --no-python build/trainer/apps/ctrun-fashion-mnist

  --data-dir DIR          IDX .gz files (default /usr/share/datasets/fashion-mnist)
  --epochs N              epochs to train (default 2)
  --batch-size N          samples per rank per step (default 64)
  --lr X, --momentum X    SGD settings (default 0.05, 0.9)
  --seed N                model init and sampler seed (default 0)
  --checkpoint-dir DIR    save/resume DIR/checkpoint.pt (default: none)
  --checkpoint-every N    steps between checkpoints; 0 = epoch ends only (default 100)
  --log-every N           steps between progress lines; 0 = none (default 100)
  --train-limit N         use the first N training samples (default all)
  --test-limit N          use the first N test samples (default all)
  --eval-every N          evaluate on the test set after every Nth epoch and
                          after the last (default 1)
  --max-steps N           stop after N steps in total (default no limit)
  --bucket-cap-mb X       DDP bucket size (default 25)
  --grad-compression C    none, fp16, bf16 or topk:D (default none); topk:D sends
                          the share D (0 < D <= 1) of each gradient's entries
                          with error feedback and DGC's momentum correction
                          (--momentum is then applied inside the compression)
  --topk-error-feedback on|off  keep the unsent residual (default on)
  --topk-warmup-steps N   dense steps before top-k starts (default 50)
  --topk-clip X           top-k: clip each parameter's local gradient to
                          X / sqrt(ranks) in L2 norm; 0 = none (default 0)
  --backend B             gloo or nccl (default gloo)
  --threads N             intra-op threads per rank (default cores / local ranks)
  --deterministic         one thread, deterministic kernels: reruns give equal parameters
  --store-timeout S       seconds to wait for the store and peers (default 120)
  --dump-params FILE      rank 0 writes the final parameters (float32) to FILE
  --bench-warmup N        print a BENCH line timing the steps after the first N
  --strategy S            ddp, zero1 (sharded optimizer state), zero2 (+ sharded
                          gradients) or fsdp (+ sharded parameters) (default ddp)
  --mixed-precision       zero2/fsdp: compute and reduce in bf16, fp32 master weights
  --min-unit-params N     zero2/fsdp: parameters per FSDP unit at least (default 10000)
  --ft                    fault tolerance across replica groups (under ctrun --ft-replicas):
                          a per-step quorum and commit vote, healing from a peer
  --dump-state PATH       --ft: every rank writes its parameters and optimizer state
                          (float32) to PATH.<group>.<rank> at the end
)";
}

// --ft trains DDP with plain gradients and no checkpoint files (a peer heals a
// restarted group); --dump-state is its output.
namespace {
Result<TrainFlags> CheckFtFlags(TrainFlags flags) {
  if (!flags.ft) {
    if (!flags.dump_state.empty()) return Status::InvalidArgument("--dump-state needs --ft (without it use --dump-params)");
    return flags;
  }
  if (flags.strategy != "ddp" || flags.grad_compression != "none") {
    return Status::InvalidArgument("--ft needs --strategy ddp and no --grad-compression");
  }
  if (!flags.checkpoint_dir.empty()) {
    return Status::InvalidArgument("--ft with --checkpoint-dir: not supported yet (a restarted group heals from "
                                   "a peer); drop --checkpoint-dir");
  }
  return flags;
}
}  // namespace

Result<TrainFlags> ParseTrainFlags(const std::vector<std::string>& args) {
  TrainFlags flags;
  int64_t threads = 0;
  std::string error_feedback;  // "" = not given (on)
  int64_t warmup_steps = -1;   // -1 = not given
  double clip = -1;            // -1 = not given
  const std::map<std::string, FlagSetter> table = {
      {"--data-dir", TextFlag(&flags.data_dir)},
      {"--epochs", IntFlag(&flags.epochs, 1)},
      {"--batch-size", IntFlag(&flags.batch_size, 1)},
      {"--lr", RealFlag(&flags.lr, true)},
      {"--momentum", RealFlag(&flags.momentum, false)},
      {"--seed", IntFlag(&flags.seed, 0)},
      {"--checkpoint-dir", TextFlag(&flags.checkpoint_dir)},
      {"--checkpoint-every", IntFlag(&flags.checkpoint_every, 0)},
      {"--log-every", IntFlag(&flags.log_every, 0)},
      {"--train-limit", IntFlag(&flags.train_limit, 0)},
      {"--test-limit", IntFlag(&flags.test_limit, 0)},
      {"--eval-every", IntFlag(&flags.eval_every, 1)},
      {"--max-steps", IntFlag(&flags.max_steps, 0)},
      {"--bucket-cap-mb", RealFlag(&flags.bucket_cap_mb, true)},
      {"--grad-compression", TextFlag(&flags.grad_compression)},
      {"--topk-error-feedback", TextFlag(&error_feedback)},
      {"--topk-warmup-steps", IntFlag(&warmup_steps, 0)},
      {"--topk-clip", RealFlag(&clip, false)},
      {"--backend", TextFlag(&flags.backend)},
      {"--threads", IntFlag(&threads, 0)},
      {"--store-timeout", IntFlag(&flags.store_timeout_s, 1)},
      {"--dump-params", TextFlag(&flags.dump_params)},
      {"--bench-warmup", IntFlag(&flags.bench_warmup, 0)},
      {"--strategy", TextFlag(&flags.strategy)},
      {"--min-unit-params", IntFlag(&flags.min_unit_params, 1)},
      {"--dump-state", TextFlag(&flags.dump_state)},
  };
  CTRUN_RETURN_IF_ERROR(ParseFlagTable(args, table,
                                       {{"--deterministic", &flags.deterministic},
                                        {"--mixed-precision", &flags.mixed_precision},
                                        {"--ft", &flags.ft}},
                                       &flags.help));
  if (threads > 4096) return Status::InvalidArgument("--threads " + std::to_string(threads) + ": too many");
  flags.threads = static_cast<int>(threads);
  CTRUN_RETURN_IF_ERROR(CheckGradCompression(flags));
  if (!error_feedback.empty() && error_feedback != "on" && error_feedback != "off") {
    return Status::InvalidArgument("--topk-error-feedback '" + error_feedback + "': use on or off");
  }
  if (flags.topk_density == 0) {
    for (const auto& [given, flag] : {std::pair{!error_feedback.empty(), "--topk-error-feedback"},
                                      std::pair{warmup_steps >= 0, "--topk-warmup-steps"},
                                      std::pair{clip >= 0, "--topk-clip"}}) {
      if (given) {
        return Status::InvalidArgument(std::string(flag) +
                                       " applies only to top-k: add --grad-compression topk:D (e.g. topk:0.01) "
                                       "or drop it");
      }
    }
  }
  flags.topk_error_feedback = error_feedback != "off";
  if (warmup_steps >= 0) flags.topk_warmup_steps = warmup_steps;
  if (clip >= 0) flags.topk_clip = clip;
  if (flags.strategy != "ddp" && flags.strategy != "zero1" && flags.strategy != "zero2" &&
      flags.strategy != "fsdp") {
    return Status::InvalidArgument("--strategy '" + flags.strategy +
                                   "': unknown (use ddp, zero1, zero2 or fsdp)");
  }
  if (flags.topk_density > 0 && flags.strategy != "ddp") {
    return Status::InvalidArgument("--grad-compression " + flags.grad_compression +
                                   " needs --strategy ddp (top-k is a DDP compression mode)");
  }
  if (flags.topk_density > 0 && flags.momentum >= 1) {
    return Status::InvalidArgument("--momentum " + std::to_string(flags.momentum) +
                                   ": top-k compression needs a momentum below 1");
  }
  if (flags.mixed_precision && flags.strategy != "zero2" && flags.strategy != "fsdp") {
    return Status::InvalidArgument("--mixed-precision needs --strategy zero2 or fsdp (DDP has "
                                   "--grad-compression fp16 instead)");
  }
  if (flags.backend != "gloo" && flags.backend != "nccl") {
    return Status::InvalidArgument("--backend '" + flags.backend + "': unknown (use gloo or nccl)");
  }
  return CheckFtFlags(flags);
}

}  // namespace ctrun::trainer
