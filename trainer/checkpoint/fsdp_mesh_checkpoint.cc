#include "trainer/checkpoint/fsdp_mesh_checkpoint.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <utility>
#include <vector>

#include "trainer/checkpoint/mesh_checkpoint.h"
#include "trainer/checkpoint/optimizer_state.h"

namespace ctrun::trainer {
namespace {

// The whole flat tensor of which `part` is this rank's shard (all-gathered
// over the shard group; `part` itself when FSDP does not shard).
Result<at::Tensor> GatherFlat(FullyShardedDataParallel& fsdp, const at::Tensor& part) {
  if (!fsdp.sharded() || fsdp.comm().size() == 1) return part.detach();
  at::Tensor send = part.detach().to(fsdp.device()).contiguous();
  at::Tensor full = at::empty({send.numel() * fsdp.comm().size()}, send.options());
  CTRUN_RETURN_IF_ERROR(WaitWork(fsdp.comm().AllGather(send, full), "all-gather of checkpoint state"));
  return full;
}

// This rank's part of the flat tensor `full`.
at::Tensor OwnPart(FullyShardedDataParallel& fsdp, const FlatLayout& layout, const at::Tensor& full) {
  if (!fsdp.sharded()) return full;
  return full.narrow(0, static_cast<int64_t>(fsdp.comm().rank()) * layout.shard_numel, layout.shard_numel);
}

bool Elementwise(const std::string& key) { return key != "step"; }  // Adam's step is one number

Status UnknownName(const std::string& name) {
  return Status::InvalidArgument("FSDP checkpoint: parameter " + name + " is not in the model's registry");
}

}  // namespace

Status SaveFsdpMeshCheckpoint(const std::string& dir, const DeviceMesh& mesh, FullyShardedDataParallel& fsdp,
                              const ShardRegistry& registry, torch::optim::Optimizer& optimizer,
                              const TrainPosition& position) {
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> shards = fsdp.parameters();
  std::vector<NamedSlice> slices;
  for (size_t u = 0; u < fsdp.unit_count(); ++u) {
    auto params = GatherFlat(fsdp, fsdp.shard(u));
    if (!params.ok()) return params.status();
    auto state = GetParamState(optimizer, shards[u]);
    if (!state.ok()) return state.status();
    ParamState gathered;
    for (const auto& [key, value] : *state) {
      if (!Elementwise(key)) {
        gathered[key] = value;
        continue;
      }
      auto full = GatherFlat(fsdp, value);
      if (!full.ok()) return full.status();
      gathered[key] = *full;
    }
    if (mesh.coord().dp != 0) continue;  // gathered for the shard group's dp-0 rank
    for (const FlatEntry& entry : fsdp.layout(u).entries) {
      if (registry.find(entry.name) == registry.end()) return UnknownName(entry.name);
      NamedSlice slice{.name = entry.name, .value = params->narrow(0, entry.offset, entry.numel).view(entry.shape),
                       .state = {}};
      for (const auto& [key, value] : gathered) {
        slice.state[key] = Elementwise(key) ? value.narrow(0, entry.offset, entry.numel).view(entry.shape) : value;
      }
      slices.push_back(std::move(slice));
    }
  }
  return SaveMeshSlices(dir, mesh, slices, position);
}

Result<std::optional<TrainPosition>> LoadFsdpMeshCheckpoint(const std::string& dir, FullyShardedDataParallel& fsdp,
                                                            const ShardRegistry& registry,
                                                            torch::optim::Optimizer& optimizer) {
  std::vector<NamedSlice> slices;
  for (size_t u = 0; u < fsdp.unit_count(); ++u) {
    for (const FlatEntry& entry : fsdp.layout(u).entries) {
      if (registry.find(entry.name) == registry.end()) return UnknownName(entry.name);
      slices.push_back(NamedSlice{.name = entry.name, .value = at::empty(entry.shape, at::kFloat), .state = {}});
    }
  }
  auto loaded = LoadMeshSlices(dir, registry, slices);
  if (!loaded.ok() || !loaded->has_value()) return loaded;

  // Each unit's flat parameter and state, laid out again; applied once all are built.
  std::vector<std::pair<at::Tensor, ParamState>> units;
  size_t next = 0;
  for (size_t u = 0; u < fsdp.unit_count(); ++u) {
    const FlatLayout& layout = fsdp.layout(u);
    at::Tensor flat = at::zeros({layout.padded_numel}, at::kFloat);
    ParamState state;
    const ParamState& first = slices[next].state;
    for (const auto& [key, value] : first) {
      state[key] = Elementwise(key) ? at::zeros({layout.padded_numel}, at::kFloat) : value;
    }
    for (const FlatEntry& entry : layout.entries) {
      const NamedSlice& slice = slices[next++];
      flat.narrow(0, entry.offset, entry.numel).copy_(slice.value.reshape({-1}));
      if (slice.state.size() != first.size()) {
        return Status::InvalidArgument("checkpoint '" + dir + "' cannot be loaded (the optimizer state of " +
                                       slice.name + " differs from its unit's); remove it or save it again");
      }
      for (const auto& [key, value] : slice.state) {
        if (Elementwise(key)) state.at(key).narrow(0, entry.offset, entry.numel).copy_(value.reshape({-1}));
      }
    }
    ParamState own;
    for (const auto& [key, value] : state) own[key] = Elementwise(key) ? OwnPart(fsdp, layout, value).clone() : value;
    units.emplace_back(OwnPart(fsdp, layout, flat), std::move(own));
  }
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> shards = fsdp.parameters();
  if (!shards.empty()) {  // another optimizer fails here, before anything changed
    auto probe = GetParamState(optimizer, shards[0]);
    if (!probe.ok()) return probe.status();
  }
  for (size_t u = 0; u < units.size(); ++u) {
    at::Tensor shard = shards[u];
    shard.copy_(units[u].first);
    for (auto& [key, value] : units[u].second) {
      if (Elementwise(key)) value = value.to(shard.device());
    }
    CTRUN_RETURN_IF_ERROR(SetParamState(optimizer, shard, units[u].second));
  }
  return loaded;
}

}  // namespace ctrun::trainer
