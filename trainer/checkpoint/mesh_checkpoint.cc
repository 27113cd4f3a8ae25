#include "trainer/checkpoint/mesh_checkpoint.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "trainer/checkpoint/archive_file.h"
#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/checkpoint/remove_tree.h"
#include "trainer/comm/torch_error.h"

namespace ctrun::trainer {
namespace {

namespace fs = std::filesystem;

std::string ShardName(int pp, int tp) { return "shard-pp" + std::to_string(pp) + "-tp" + std::to_string(tp) + ".pt"; }

Status Unloadable(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("checkpoint '" + path + "' cannot be loaded (" + why +
                                 "); remove it or use the model it was saved from");
}

// The old shard files of one checkpoint, opened on first use.
class OldShards {
 public:
  OldShards(std::string dir, MeshShape mesh) : dir_(std::move(dir)), mesh_(mesh) {}

  // The tensor `key` from the file of (pp, tp), or an error naming the file.
  // `found` false (and OK) when that file does not hold `key`.
  Status Read(int pp, int tp, const std::string& key, at::Tensor& out, bool& found) {
    const std::string path = dir_ + "/" + ShardName(pp, tp);
    auto it = open_.find(path);
    if (it == open_.end()) {
      auto archive = std::make_unique<torch::serialize::InputArchive>();
      try {
        archive->load_from(path);
      } catch (const std::exception& error) {
        return Unloadable(path, "unreadable: " + TorchErrorLine(error));
      }
      it = open_.emplace(path, std::move(archive)).first;
    }
    try {
      found = it->second->try_read(key, out);
    } catch (const std::exception& error) {
      return Unloadable(path, "unreadable entry " + key + ": " + TorchErrorLine(error));
    }
    return Status::Ok();
  }

  // The whole tensor `key` (a parameter, or its optimizer state) as the old
  // mesh held it: `spec` says how it is cut. Replicated tensors, and state
  // that is not `elementwise` (Adam's step, one number per parameter), come
  // from the first file that holds them.
  // `absent` is set when no file holds `key` (then the result is undefined).
  Result<at::Tensor> Full(const std::string& key, const ShardSpec& spec, bool& absent, bool elementwise = true) {
    absent = false;
    for (int pp = 0; pp < mesh_.pp; ++pp) {
      std::vector<at::Tensor> parts;
      for (int tp = 0; tp < mesh_.tp; ++tp) {
        at::Tensor part;
        bool found = false;
        CTRUN_RETURN_IF_ERROR(Read(pp, tp, key, part, found));
        if (!found) break;
        parts.push_back(part);
        const bool cut = elementwise && spec.dim >= 0 && part.sizes().vec() != spec.full_shape;
        if (!cut) return part;  // replicated, or not element-wise
      }
      if (parts.empty()) continue;
      if (static_cast<int>(parts.size()) != mesh_.tp) {
        return Unloadable(dir_, key + " is missing from a tensor-parallel shard");
      }
      at::Tensor full = at::cat(parts, spec.dim);
      if (full.sizes().vec() != spec.full_shape) {
        return Unloadable(dir_, key + " has another shape than this model's");
      }
      return full;
    }
    absent = true;
    return at::Tensor();
  }

 private:
  std::string dir_;
  MeshShape mesh_;
  std::map<std::string, std::unique_ptr<torch::serialize::InputArchive>> open_;
};

at::Tensor Cut(const at::Tensor& full, const ShardSpec& spec) {
  if (spec.dim < 0 || spec.parts == 1 || full.sizes().vec() != spec.full_shape) return full;
  const int64_t len = spec.full_shape[static_cast<size_t>(spec.dim)] / spec.parts;
  return full.narrow(spec.dim, spec.index * len, len).clone(at::MemoryFormat::Contiguous);
}

// Rank 0's part of a save: the step's meta.pt, then LATEST names it, then
// older steps are removed.
Status CommitMeshCheckpoint(const std::string& dir, const std::string& step_dir, const DeviceMesh& mesh,
                            const TrainPosition& position) {
  const std::string path = dir + "/" + step_dir;
  torch::serialize::OutputArchive meta;
  meta.write("mesh", at::tensor(std::vector<int64_t>{mesh.shape().pp, mesh.shape().dp, mesh.shape().tp}));
  meta.write("step", CounterTensor(position.step));
  meta.write("epoch", CounterTensor(position.epoch));
  meta.write("world_size", CounterTensor(position.world_size));
  meta.write("seed", CounterTensor(position.seed));
  CTRUN_RETURN_IF_ERROR(SaveArchiveAtomically(meta, path + "/meta.pt"));
  {
    std::ofstream latest(dir + "/LATEST.tmp", std::ios::trunc);
    latest << step_dir << "\n";
    if (!latest.flush()) return Status::IOError("cannot write '" + dir + "/LATEST.tmp'");
  }
  std::error_code ec;
  fs::rename(dir + "/LATEST.tmp", dir + "/LATEST", ec);
  if (ec) return Status::IOError("cannot rename '" + dir + "/LATEST.tmp': " + ec.message());
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name != step_dir) RemoveTree(entry.path().string());
  }
  return Status::Ok();
}

}  // namespace

Status SaveMeshSlices(const std::string& dir, const DeviceMesh& mesh, const std::vector<NamedSlice>& slices,
                      const TrainPosition& position) {
  const std::string step_dir = "step-" + std::to_string(position.step);
  const std::string path = dir + "/" + step_dir;
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    return Status::IOError("cannot create checkpoint directory '" + path + "': " + ec.message() +
                           " (check --checkpoint-dir is writable)");
  }
  if (mesh.coord().dp == 0) {
    torch::serialize::OutputArchive archive;
    for (const NamedSlice& slice : slices) {
      // Written from the CPU: libtorch 2.x's archive crashes on CUDA tensors.
      archive.write("p/" + slice.name, slice.value.detach().cpu());
      for (const auto& [key, value] : slice.state) archive.write("s/" + slice.name + "/" + key, value.cpu());
    }
    CTRUN_RETURN_IF_ERROR(SaveArchiveAtomically(archive, path + "/" + ShardName(mesh.coord().pp, mesh.coord().tp)));
  }
  if (mesh.world() != nullptr) CTRUN_RETURN_IF_ERROR(WaitWork(mesh.world()->Barrier(), "checkpoint barrier"));
  // Rank 0 commits; every rank waits for that, so a peer that dies right
  // after its save cannot cut the commit short (its agent would stop rank 0
  // mid-write). A commit error is rank 0's to report.
  const Status committed = mesh.rank() == 0 ? CommitMeshCheckpoint(dir, step_dir, mesh, position) : Status::Ok();
  if (mesh.world() != nullptr) CTRUN_RETURN_IF_ERROR(WaitWork(mesh.world()->Barrier(), "checkpoint commit barrier"));
  return committed;
}

Result<std::optional<TrainPosition>> LoadMeshSlices(const std::string& dir, const ShardRegistry& registry,
                                                    std::vector<NamedSlice>& slices) {
  std::ifstream latest_file(dir + "/LATEST");
  if (!latest_file) return std::optional<TrainPosition>();
  std::string step_dir;
  std::getline(latest_file, step_dir);
  const std::string path = dir + "/" + step_dir;

  torch::serialize::InputArchive meta;
  at::Tensor saved_mesh, step, epoch, world, seed;
  try {
    meta.load_from(path + "/meta.pt");
    meta.read("mesh", saved_mesh);
    meta.read("step", step);
    meta.read("epoch", epoch);
    meta.read("world_size", world);
    meta.read("seed", seed);
  } catch (const std::exception& error) {
    return Unloadable(path + "/meta.pt", "unreadable: " + TorchErrorLine(error));
  }
  const MeshShape old{static_cast<int>(saved_mesh[0].item<int64_t>()), static_cast<int>(saved_mesh[1].item<int64_t>()),
                      static_cast<int>(saved_mesh[2].item<int64_t>())};
  OldShards shards(path, old);

  // Everything is read and cut into `loaded` first; `slices` changes only
  // once all of it is at hand.
  std::vector<NamedSlice> loaded;
  for (const NamedSlice& slice : slices) {
    auto spec = registry.find(slice.name);
    if (spec == registry.end()) return Unloadable(path, slice.name + " is not a parameter of this model");
    bool absent = false;
    auto full = shards.Full("p/" + slice.name, spec->second, absent);
    if (!full.ok()) return full.status();
    if (absent) return Unloadable(path, "no shard holds " + slice.name);
    NamedSlice out{.name = slice.name, .value = Cut(*full, spec->second), .state = {}};
    if (out.value.sizes() != slice.value.sizes()) {
      return Unloadable(path, slice.name + " has another shape than this model's");
    }
    for (const std::string key : {"momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"}) {
      const bool elementwise = key != "step";  // Adam's step count is one number
      auto value_full = shards.Full("s/" + slice.name + "/" + key, spec->second, absent, elementwise);
      if (!value_full.ok()) return value_full.status();
      if (!absent) {
        out.state[key] = elementwise ? Cut(*value_full, spec->second).to(slice.value.device()) : *value_full;
      }
    }
    loaded.push_back(std::move(out));
  }
  slices = std::move(loaded);
  return std::optional<TrainPosition>(TrainPosition{.step = step.item<int64_t>(),
                                                    .epoch = epoch.item<int64_t>(),
                                                    .epoch_consumed = 0,
                                                    .world_size = world.item<int64_t>(),
                                                    .seed = seed.item<int64_t>()});
}

Status SaveMeshCheckpoint(const std::string& dir, const DeviceMesh& mesh, torch::nn::Module& stage,
                          const ShardRegistry& registry, torch::optim::Optimizer& optimizer,
                          const TrainPosition& position) {
  std::vector<NamedSlice> slices;
  if (mesh.coord().dp == 0) {  // the others write nothing
    for (const auto& item : stage.named_parameters(true)) {
      if (registry.find(item.key()) == registry.end()) continue;
      auto state = GetParamState(optimizer, item.value());
      if (!state.ok()) return state.status();
      slices.push_back(NamedSlice{.name = item.key(), .value = item.value(), .state = std::move(*state)});
    }
  }
  return SaveMeshSlices(dir, mesh, slices, position);
}

Result<std::optional<TrainPosition>> LoadMeshCheckpoint(const std::string& dir, const DeviceMesh&,
                                                        torch::nn::Module& stage, const ShardRegistry& registry,
                                                        torch::optim::Optimizer& optimizer) {
  std::vector<NamedSlice> slices;
  std::vector<at::Tensor> params;
  for (const auto& item : stage.named_parameters(true)) {
    if (registry.find(item.key()) == registry.end()) continue;
    slices.push_back(NamedSlice{.name = item.key(), .value = item.value(), .state = {}});
    params.push_back(item.value());
  }
  auto loaded = LoadMeshSlices(dir, registry, slices);
  if (!loaded.ok() || !loaded->has_value()) return loaded;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) params[i].copy_(slices[i].value);
  for (size_t i = 0; i < params.size(); ++i) {
    CTRUN_RETURN_IF_ERROR(SetParamState(optimizer, params[i], slices[i].state));
  }
  return loaded;
}

}  // namespace ctrun::trainer
