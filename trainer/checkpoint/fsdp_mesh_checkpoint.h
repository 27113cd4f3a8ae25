// Mesh checkpoints (mesh_checkpoint.h: the same files, the same commit) of
// a stage that FSDP shards over the mesh's dp dimension: ctrun-gpt's
// --dp-shard full|grad-op (HSDP, with or without pp and tp) and
// --strategy fsdp.
//
// Save: within each shard group, every unit's flat shard and its optimizer
// state are all-gathered (one unit at a time, the stage's whole state held
// on the rank once gathered), cut into the parameters' tensor-parallel
// slices by name (the unit's FlatLayout), and the dp-0 ranks write them as
// a DDP mesh would. Load: each rank reads its (pp, tp) slices, whatever mesh
// saved them, lays each unit's flat parameter and state out again and
// keeps its own shard. So a checkpoint reshards across pp, dp, tp and
// dp_shard alike, and loads on a DDP mesh or a sharded one either way.
// Optimizer state is re-cut element-wise: SGD, Adam and AdamW only
// (optimizer_state.h); Adam's step is the unit's (every parameter of a
// unit steps together).
//
// Free functions; everything is borrowed for the call.
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/comm/device_mesh.h"
#include "trainer/parallel/fsdp.h"
#include "trainer/parallel/tensor_parallel.h"

namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

// Collective over the world (every rank calls it). `optimizer` is the one
// over fsdp.parameters(). Returns OK, Unavailable when a collective fails,
// IOError naming the file, InvalidArgument for another optimizer or a unit
// parameter the registry does not know.
Status SaveFsdpMeshCheckpoint(const std::string& dir, const DeviceMesh& mesh, FullyShardedDataParallel& fsdp,
                              const ShardRegistry& registry, torch::optim::Optimizer& optimizer,
                              const TrainPosition& position);

// Every rank, at start. Returns as LoadMeshCheckpoint (nullopt without
// LATEST; InvalidArgument naming the file when it cannot be loaded, and
// when the saved optimizer state does not cover a unit's parameters alike).
// Nothing is changed on error.
Result<std::optional<TrainPosition>> LoadFsdpMeshCheckpoint(const std::string& dir, FullyShardedDataParallel& fsdp,
                                                            const ShardRegistry& registry,
                                                            torch::optim::Optimizer& optimizer);

}  // namespace ctrun::trainer
