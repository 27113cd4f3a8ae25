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
// Under pipeline parallelism (pp > 1) the wrapper covers the rank's stage,
// all its chunks, and the pipeline runs it: ctrun-gpt gathers every unit
// for the step (FullyShardedDataParallel::GatherForStep) and reduces the
// gradients the micro-batches accumulated at its end.
//
// Lifetimes: `root`, `model`, `mesh` and `world` must outlive the wrapper
// (the mesh owns the shard and replicate groups). Thread model: the
// training thread; collective over the world (SplitDp).
#pragma once

#include <memory>

#include "base/result.h"
#include "trainer/apps/gpt_flags.h"
#include "trainer/comm/device_mesh.h"
#include "trainer/models/gpt_chunks.h"
#include "trainer/parallel/fsdp.h"

namespace ctrun::trainer {

// `chunks` is this rank's part of the model (every chunk of its pipeline
// stage). Returns the wrapper, or FSDP's / SplitDp's errors.
Result<std::unique_ptr<FullyShardedDataParallel>> MakeGptFsdp(GptChunksImpl& chunks, DeviceMesh& mesh,
                                                               Communicator& world, const GptFlags& flags);

}  // namespace ctrun::trainer
