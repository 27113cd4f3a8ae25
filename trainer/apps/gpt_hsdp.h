// MakeGptFsdp: ctrun-gpt's FSDP wrapper, for --strategy fsdp (full sharding
// over the whole world, pure data parallelism) and for --dp-shard
// full|grad-op (HSDP: FSDP/ZeRO as the dp dimension of the (pp, dp, tp)
// mesh). Under --dp-shard, dp is split as dp_replicate x dp_shard
// (DeviceMesh::SplitDp; --dp-shard-size = dp_shard, default all of dp):
// the stage's parameters, this rank's tensor-parallel slices where tp > 1,
// are sharded within the shard group and replicated across the replicate
// group; gradients are reduce-scattered within the shard group, then
// all-reduced across the replicate group (FsdpOptions::replicate), i.e.
// averaged over all of dp. One unit per block unless --min-unit-params.
//
// Lifetimes: `root`, `model`, `mesh` and `world` must outlive the wrapper
// (the mesh owns the shard and replicate groups). Thread model: the
// training thread; collective over the world (SplitDp).
#pragma once

#include <memory>

#include "base/result.h"
#include "trainer/apps/gpt_flags.h"
#include "trainer/comm/device_mesh.h"
#include "trainer/models/gpt.h"
#include "trainer/parallel/fsdp.h"

namespace ctrun::trainer {

// `model` is the pp=1 stage (chunk 0 of `root`). Returns the wrapper, or
// FSDP's / SplitDp's errors.
Result<std::unique_ptr<FullyShardedDataParallel>> MakeGptFsdp(torch::nn::Module& root, GptStageImpl& model,
                                                               DeviceMesh& mesh, Communicator& world,
                                                               const GptFlags& flags);

}  // namespace ctrun::trainer
