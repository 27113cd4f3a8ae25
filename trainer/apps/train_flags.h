// TrainFlags: the command line of ctrun-fashion-mnist, parsed and checked.
//
// ParseTrainFlags is the only reader of argv for that binary. Plain data, no
// torch, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

struct TrainFlags {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t epochs = 2;
  int64_t batch_size = 64;          // per rank
  double lr = 0.05;
  double momentum = 0.9;
  int64_t seed = 0;
  std::string checkpoint_dir;       // "" = no checkpoints
  int64_t checkpoint_every = 100;   // steps; 0 = only at epoch ends
  int64_t log_every = 100;          // steps; 0 = no progress lines
  int64_t train_limit = 0;          // first N training samples; 0 = all
  int64_t test_limit = 0;           // first N test samples; 0 = all
  int64_t eval_every = 1;           // epochs between test-set evaluations (and after the last)
  int64_t max_steps = 0;            // stop after this many steps; 0 = no limit
  double bucket_cap_mb = 25;
  std::string grad_compression = "none";  // none, fp16, bf16 or topk:D
  double topk_density = 0;          // D of topk:D; 0 = not top-k
  bool topk_error_feedback = true;  // --topk-error-feedback on|off
  int64_t topk_warmup_steps = 50;   // dense synced steps before top-k
  double topk_clip = 0;             // --topk-clip: DGC's local clipping; 0 = none
  std::string backend = "gloo";
  int threads = 0;                  // intra-op threads per rank; 0 = cores / local ranks
  bool deterministic = false;
  int64_t store_timeout_s = 120;
  std::string dump_params;          // rank 0 writes final float32 parameters here
  int64_t bench_warmup = 0;         // >0: print a BENCH line timing steps after these
  std::string strategy = "ddp";     // ddp, zero1, zero2, fsdp
  bool mixed_precision = false;     // fsdp/zero2: bf16 compute and reduce
  int64_t min_unit_params = 10000;  // fsdp/zero2 wrap policy
  bool ft = false;                  // fault tolerance across replica groups (fashion_mnist_ft.h)
  std::string dump_state;           // --ft: every rank writes <PATH>.<group>.<rank> at the end
  bool help = false;
};

// Usage text for --help.
std::string TrainUsage();

// Parses `args` (argv without the program name). Accepts "--flag value" and
// "--flag=value". Returns the flags, or InvalidArgument naming the flag and
// the fix: unknown flag, missing value, not a number, or out of range
// (epochs/batch-size/threads... must be positive where stated).
Result<TrainFlags> ParseTrainFlags(const std::vector<std::string>& args);

}  // namespace ctrun::trainer
