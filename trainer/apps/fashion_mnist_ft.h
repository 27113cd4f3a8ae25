// ctrun-fashion-mnist --ft: fault-tolerant data parallelism across replica
// groups (docs/fault-tolerance.md). The worker runs under `ctrun
// --ft-replicas MIN:MAX`, whose agent gives it CTRUN_FT_SOCKET, CTRUN_FT_HOST,
// CTRUN_FT_GROUP and CTRUN_FT_REPLICAS; its group is the torchrun world
// (WORLD_SIZE, RANK, LOCAL_RANK), whose Gloo process group averages the
// gradients within the group (DDP) before the ring of its local rank
// averages them across the quorum's groups (ft_replica.h).
//
// Steps: the run trains --max-steps committed steps (or --epochs x the
// steps of an epoch). Step s reads stream positions [s*B, (s+1)*B) with the
// global batch B = --batch-size x WORLD_SIZE x MAX (CTRUN_FT_REPLICAS), split
// among replica_world x WORLD_SIZE ranks (step_share.h; this rank's share is
// replica_rank x WORLD_SIZE + RANK), in the order of the sampler's epoch
// permutation. Each step is committed or discarded by the vote; a discarded
// step runs again on the same samples. A group told to heal loads a peer's
// state (heal_state.h); a group told to serve offers its own.
//
// Output: rank 0 of each group prints one line per committed step:
//   ft step <step> quorum <quorum_id> replicas <replica_world> loss <x>
// (<step> counted from 0; <x> this rank's loss on its share, %.6f), one
// line per discarded step:
//   ft discard step <step> quorum <quorum_id>: <reason>
// and each heal: `ft healed step <step> from <source>`. With --dump-state
// PATH every rank writes PATH.<CTRUN_FT_GROUP>.<RANK> at the end: its
// parameters (model order), then each parameter's optimizer state (keys in
// name order), as raw float32, so a test can compare ranks bitwise.
#pragma once

#include "base/result.h"
#include "trainer/apps/fashion_mnist_worker.h"

namespace ctrun::trainer {

// OK when the environment has CTRUN_FT_SOCKET, else InvalidArgument
// "--ft needs ctrun --ft-replicas".
Status CheckFtEnvironment();

// Trains `w` (set up by SetUp, strategy ddp) under --ft until the last step
// is committed. Returns the first failure: the agent link's, a healing
// failure, or a torch error.
Status TrainFt(Worker& w);

}  // namespace ctrun::trainer
