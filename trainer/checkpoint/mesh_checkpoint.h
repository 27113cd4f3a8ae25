// Checkpoints of a model laid out on a DeviceMesh: saved per mesh
// coordinate, loadable on any other mesh (re-sharded by parameter name).
//
// Layout in directory `dir`:
//   step-<N>/shard-pp<P>-tp<T>.pt  written by the dp-rank-0 replica of
//       (stage P, tensor-parallel rank T): "p/<name>" its slice of each of
//       its parameters, "s/<name>/<key>" the optimizer state of that slice
//       (optimizer_state.h: SGD, Adam, AdamW);
//   step-<N>/meta.pt  written by world rank 0 after every shard is on disk:
//       the saving mesh (pp, dp, tp) and the training position;
//   LATEST  "step-<N>", replaced atomically by rank 0 after meta.pt: the
//       commit point. Older step-* directories are removed after it.
// A crash at any point leaves LATEST naming a whole checkpoint.
//
// Loading on a new mesh: each rank rebuilds the full tensor of each of its
// parameters (and optimizer state) from the old slices that hold it and
// cuts its own slice (ShardSpec). Every old shard file must be readable by
// every rank (a shared directory on several nodes).
//
// Keys are the parameters' global names ("block5.attn.q.weight"), and a
// load looks for each in every old shard-pp<P> file, so which stage held a
// layer does not matter: a stage holding several non-contiguous chunks
// (interleaved 1F1B, trainer/models/gpt_chunks.h) saves the same names as a
// plain one, and either loads on the other.
//
// The files hold named slices: SaveMeshSlices/LoadMeshSlices work on them
// directly, for a stage whose parameters are not plain tensors between
// steps (FSDP's flat shards: fsdp_mesh_checkpoint.h); SaveMeshCheckpoint and
// LoadMeshCheckpoint take them from a module and its optimizer.
//
// Free functions; everything is borrowed for the call.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/comm/device_mesh.h"
#include "trainer/parallel/tensor_parallel.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

// One parameter's slice as this rank holds it on the mesh (its tensor-
// parallel part, ShardRegistry), and that slice's optimizer state.
struct NamedSlice {
  std::string name;  // the global name, a key of the registry
  at::Tensor value;  // the slice; for a load, its shape and device say what is wanted
  ParamState state;  // optimizer_state.h (empty before the first step)
};

// Collective over the mesh's world (every rank calls it): the mesh's dp-0
// ranks write their `slices` (the others' are not read), then rank 0
// commits, and every rank returns once it has: a peer that dies right after
// its save cannot cut the commit short. Only rank 0 reports a commit error
// (it then fails, and the run restarts from the last committed step).
// Errors as SaveMeshCheckpoint's.
Status SaveMeshSlices(const std::string& dir, const DeviceMesh& mesh, const std::vector<NamedSlice>& slices,
                      const TrainPosition& position);

// Every rank, at start: replaces each slice's value (a new CPU tensor of
// the same shape) and state (on the value's device) with the checkpoint's,
// cut for this rank by `registry`. Returns as LoadMeshCheckpoint; `slices`
// is changed only on success.
Result<std::optional<TrainPosition>> LoadMeshSlices(const std::string& dir, const ShardRegistry& registry,
                                                    std::vector<NamedSlice>& slices);

// Collective over the mesh's world (every rank calls it). `stage` is this
// rank's model part, `registry` its specs, `optimizer` over stage's
// parameters. Returns OK, IOError naming the file, Unavailable when the
// barrier fails, InvalidArgument for an unsupported optimizer.
Status SaveMeshCheckpoint(const std::string& dir, const DeviceMesh& mesh, torch::nn::Module& stage,
                          const ShardRegistry& registry, torch::optim::Optimizer& optimizer,
                          const TrainPosition& position);

// Every rank, at start. Returns the saved position (world_size: the saving
// world), nullopt when `dir` has no LATEST, or InvalidArgument naming the
// file when a shard is missing, unreadable, lacks one of this rank's
// parameters or has another full shape (another model). Nothing is changed
// on error.
Result<std::optional<TrainPosition>> LoadMeshCheckpoint(const std::string& dir, const DeviceMesh& mesh,
                                                        torch::nn::Module& stage, const ShardRegistry& registry,
                                                        torch::optim::Optimizer& optimizer);

}  // namespace ctrun::trainer
