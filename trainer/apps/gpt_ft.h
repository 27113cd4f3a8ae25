// ctrun-gpt --ft: fault-tolerant data parallelism across replica groups
// (docs/fault-tolerance.md), as ctrun-fashion-mnist --ft does it
// (fashion_mnist_ft.h). The worker runs under `ctrun --ft-replicas MIN:MAX`
// (ft_env.h); its group is the torchrun world, its mesh pure data parallel
// (pp = tp = 1, dp = WORLD_SIZE; gpt_ft_flags.h refuses the rest). DDP
// averages the gradients within the group, then the ring of its local rank
// averages them across the quorum's groups (ft_replica.h); the vote commits
// or discards the step; a group told to heal loads a peer's model, Adam (or
// SGD) state, step and RNG (heal_state.h); a group told to serve offers its
// own.
//
// With --strategy fsdp, FSDP shards the model over the group instead of
// DDP: HSDP, its replicate dimension the quorum's groups. After the group's
// reduce-scatter, each rank's shard gradients are averaged across the
// groups by the ring of its rank (rank r of every group holds the same
// shard), the optimizer steps the shards, and healing moves each rank's
// shards and their optimizer state ("shard/<unit>") from rank r of a peer.
//
// Steps: the run trains --steps committed steps. Step s's global batch is
// SampleBatch(corpus, s, --seed, --global-batch, --seq-len) (text_corpus.h),
// a function of the step alone; its rows are divided among replica_world x
// WORLD_SIZE ranks (step_share.h; this rank's share is replica_rank x
// WORLD_SIZE + RANK), so a discarded step runs again on the same rows,
// shared among the ranks then alive. --global-batch must be at least
// MAX x WORLD_SIZE (no rank without rows).
//
// Output: rank 0 of each group prints, as fashion_mnist_ft.h's,
//   ft step <step> quorum <quorum_id> replicas <replica_world> loss <x>
//   ft discard step <step> quorum <quorum_id>: <reason>
//   ft healed step <step> quorum <quorum_id>
// (<x>: this rank's loss on its share, %.6f). With --dump-state PATH every
// rank writes PATH.<CTRUN_FT_GROUP>.<RANK> at the end (state_dump.h; under
// FSDP its shards). The
// test hooks CTRUN_FT_FAULT and CTRUN_FT_HOLD act at the same points as in
// fashion_mnist_ft.cc (fault_point.h).
//
// Thread model: the training thread; everything is borrowed for the call.
#pragma once

#include <ATen/core/Tensor.h>

#include "base/result.h"
#include "trainer/apps/gpt_flags.h"
#include "trainer/comm/dist_env.h"
#include "trainer/data/text_corpus.h"
#include "trainer/models/gpt_chunks.h"
#include "trainer/parallel/ddp.h"
#include "trainer/parallel/fsdp.h"

namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

// What TrainGptFt trains with, set up by ctrun-gpt as without --ft.
struct GptFtParts {
  const GptFlags& flags;
  const DistEnv& env;
  const TextCorpus& corpus;
  at::Device device;
  GptChunksImpl& model;             // one chunk: the whole model
  DistributedDataParallel* ddp;     // over the group; null when it has one rank or under FSDP
  FullyShardedDataParallel* fsdp;   // --strategy fsdp: over the group; else null
  torch::optim::Optimizer& optimizer;
};

// OK when the environment has CTRUN_FT_SOCKET (ft_env.h), else
// InvalidArgument "--ft needs ctrun --ft-replicas".
Status CheckGptFtEnvironment();

// Trains under --ft until the last step is committed. Returns the first
// failure: a bad environment or --global-batch, the agent link's, a healing
// failure, or a torch error.
Status TrainGptFt(const GptFtParts& parts);

}  // namespace ctrun::trainer
