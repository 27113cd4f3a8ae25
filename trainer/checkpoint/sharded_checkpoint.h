// Checkpoints of an FSDP model: sharded (each rank its shards) and
// consolidated (one full state on rank 0, in checkpoint.h's format).
//
// Sharded layout, in directory `dir`:
//   shard-<r>-of-<N>.pt  rank r's float32 shard of each unit and the matching
//                        optimizer state (torch archives, written by rank r);
//   meta.pt              written by rank 0 after every shard is on disk (the
//                        commit point): world size, training position, and per
//                        unit its parameters' names and shapes and the
//                        optimizer state keys.
// Each rank writes <file>.tmp and renames it. Loading works at any world
// size: each rank reads the parts of the old shards that overlap its new
// shard (the directory must be visible to every rank). Optimizer state is
// re-cut element-wise, so only SGD, Adam and AdamW are supported
// (optimizer_state.h). The optimizer must be the one over fsdp.parameters().
//
// Free functions; everything is borrowed for the call.
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/parallel/fsdp.h"

namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

// Collective (every rank calls it). Returns OK, IOError naming the file,
// Unavailable when a barrier fails, InvalidArgument for an unsupported
// optimizer.
Status SaveShardedCheckpoint(const std::string& dir, FullyShardedDataParallel& fsdp,
                             torch::optim::Optimizer& optimizer, const TrainPosition& position);

// Every rank, at start. Returns the saved position (its world_size is the
// saving world size); nullopt when `dir` has no meta.pt; or InvalidArgument
// when the units' parameters differ from the saved ones (other model or
// --min-unit-params), a shard file is missing or from another save, or a
// file does not parse. Nothing is changed on error.
Result<std::optional<TrainPosition>> LoadShardedCheckpoint(const std::string& dir,
                                                           FullyShardedDataParallel& fsdp,
                                                           torch::optim::Optimizer& optimizer);

// Collective: all-gathers every unit's parameters and optimizer state; rank
// 0 then writes `path` with SaveCheckpoint (loadable by LoadCheckpoint into
// the plain model and a full optimizer of the same type: the DDP path), and,
// when `model_path` is not empty, the parameters and buffers in the format
// of torch::save(module) (loadable with torch::load into a plain libtorch
// model). `root` is the module FSDP wraps (for names and buffers). Returns
// OK, Unavailable when a collective fails, IOError from the writes.
Status SaveFullCheckpoint(const std::string& path, const std::string& model_path,
                          torch::nn::Module& root, FullyShardedDataParallel& fsdp,
                          torch::optim::Optimizer& optimizer, const TrainPosition& position);

}  // namespace ctrun::trainer
