#include "trainer/apps/train_flags.h"

#include <charconv>
#include <functional>
#include <map>

namespace ctrun::trainer {
namespace {

Status BadNumber(const std::string& flag, const std::string& value, const std::string& want) {
  return Status::InvalidArgument(flag + " '" + value + "': not " + want + " (e.g. " + flag +
                                 (want == "a number" ? " 0.05)" : " 10)"));
}

std::function<Status(const std::string&, const std::string&)> Int(int64_t* out, int64_t min) {
  return [out, min](const std::string& flag, const std::string& value) {
    int64_t parsed = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size()) {
      return BadNumber(flag, value, "an integer");
    }
    if (parsed < min) {
      return Status::InvalidArgument(flag + " " + value + ": must be at least " +
                                     std::to_string(min));
    }
    *out = parsed;
    return Status::Ok();
  };
}

std::function<Status(const std::string&, const std::string&)> Real(double* out, bool positive) {
  return [out, positive](const std::string& flag, const std::string& value) {
    size_t used = 0;
    double parsed = 0;
    try {
      parsed = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (value.empty() || used != value.size()) return BadNumber(flag, value, "a number");
    if (positive ? !(parsed > 0) : !(parsed >= 0)) {
      return Status::InvalidArgument(flag + " " + value + ": must be " +
                                     (positive ? "greater than 0" : "0 or more"));
    }
    *out = parsed;
    return Status::Ok();
  };
}

std::function<Status(const std::string&, const std::string&)> Text(std::string* out) {
  return [out](const std::string&, const std::string& value) {
    *out = value;
    return Status::Ok();
  };
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
  --max-steps N           stop after N steps in total (default no limit)
  --bucket-cap-mb X       DDP bucket size (default 25)
  --grad-compression C    none, fp16 or bf16 (default none)
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
)";
}

Result<TrainFlags> ParseTrainFlags(const std::vector<std::string>& args) {
  TrainFlags flags;
  int64_t threads = 0;
  using Setter = std::function<Status(const std::string&, const std::string&)>;
  const std::map<std::string, Setter> table = {
      {"--data-dir", Text(&flags.data_dir)},
      {"--epochs", Int(&flags.epochs, 1)},
      {"--batch-size", Int(&flags.batch_size, 1)},
      {"--lr", Real(&flags.lr, true)},
      {"--momentum", Real(&flags.momentum, false)},
      {"--seed", Int(&flags.seed, 0)},
      {"--checkpoint-dir", Text(&flags.checkpoint_dir)},
      {"--checkpoint-every", Int(&flags.checkpoint_every, 0)},
      {"--log-every", Int(&flags.log_every, 0)},
      {"--train-limit", Int(&flags.train_limit, 0)},
      {"--test-limit", Int(&flags.test_limit, 0)},
      {"--max-steps", Int(&flags.max_steps, 0)},
      {"--bucket-cap-mb", Real(&flags.bucket_cap_mb, true)},
      {"--grad-compression", Text(&flags.grad_compression)},
      {"--backend", Text(&flags.backend)},
      {"--threads", Int(&threads, 0)},
      {"--store-timeout", Int(&flags.store_timeout_s, 1)},
      {"--dump-params", Text(&flags.dump_params)},
      {"--bench-warmup", Int(&flags.bench_warmup, 0)},
      {"--strategy", Text(&flags.strategy)},
      {"--min-unit-params", Int(&flags.min_unit_params, 1)},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag == "--help" || flag == "-h") {
      flags.help = true;
      continue;
    }
    if (flag == "--deterministic") {
      flags.deterministic = true;
      continue;
    }
    if (flag == "--mixed-precision") {
      flags.mixed_precision = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto it = table.find(flag);
    if (it == table.end()) {
      return Status::InvalidArgument("unknown flag '" + flag + "' (see --help)");
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return Status::InvalidArgument(flag + ": missing value (see --help)");
      }
      value = args[++i];
    }
    CTRUN_RETURN_IF_ERROR(it->second(flag, value));
  }
  if (threads > 4096) return Status::InvalidArgument("--threads " + std::to_string(threads) + ": too many");
  flags.threads = static_cast<int>(threads);
  if (flags.grad_compression != "none" && flags.grad_compression != "fp16" &&
      flags.grad_compression != "bf16") {
    return Status::InvalidArgument("--grad-compression '" + flags.grad_compression +
                                   "': unknown (use none, fp16 or bf16)");
  }
  if (flags.strategy != "ddp" && flags.strategy != "zero1" && flags.strategy != "zero2" &&
      flags.strategy != "fsdp") {
    return Status::InvalidArgument("--strategy '" + flags.strategy +
                                   "': unknown (use ddp, zero1, zero2 or fsdp)");
  }
  if (flags.mixed_precision && flags.strategy != "zero2" && flags.strategy != "fsdp") {
    return Status::InvalidArgument("--mixed-precision needs --strategy zero2 or fsdp (DDP has "
                                   "--grad-compression fp16 instead)");
  }
  if (flags.backend != "gloo" && flags.backend != "nccl") {
    return Status::InvalidArgument("--backend '" + flags.backend + "': unknown (use gloo or nccl)");
  }
  return flags;
}

}  // namespace ctrun::trainer
