#include "trainer/checkpoint/sharded_checkpoint.h"

#include "trainer/checkpoint/archive_file.h"
#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/comm/torch_error.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

namespace ctrun::trainer {
namespace {

std::string ShardFile(const std::string& dir, int rank, int world) {
  return dir + "/shard-" + std::to_string(rank) + "-of-" + std::to_string(world) + ".pt";
}

std::string UnitKey(size_t u) { return "unit" + std::to_string(u); }

// "name[2,3];name2[4]" for a unit: what must match to load.
std::string Signature(const FlatLayout& layout) {
  std::string out;
  for (const auto& entry : layout.entries) {
    out += entry.name + "[";
    for (size_t d = 0; d < entry.shape.size(); ++d) out += (d ? "," : "") + std::to_string(entry.shape[d]);
    out += "];";
  }
  return out;
}

Status ShardedUnloadable(const std::string& dir, const std::string& why) {
  return Status::InvalidArgument("sharded checkpoint '" + dir + "' cannot be loaded (" + why +
                                 "); use another checkpoint directory or the model it was saved from");
}

// This rank's elements of a unit: [begin, end) of the flat parameter, placed
// at `into` in the rank's tensors.
struct HeldRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t into = 0;
};

HeldRange Held(const FullyShardedDataParallel& fsdp, size_t u, int rank) {
  const FlatLayout& layout = fsdp.layout(u);
  if (!fsdp.sharded()) return {0, layout.numel, 0};
  auto [begin, end] = layout.RealRange(rank);
  return {begin, end, begin - rank * layout.shard_numel};
}

int64_t Meta(torch::serialize::InputArchive& archive, const std::string& key) {
  at::Tensor value;
  if (!archive.try_read(key, value)) throw std::runtime_error("'" + key + "' missing");
  return value.item<int64_t>();
}

std::string MetaText(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isString()) throw std::runtime_error("'" + key + "' missing");
  return value.toStringRef();
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

Status SaveShardedCheckpoint(const std::string& dir, FullyShardedDataParallel& fsdp,
                             torch::optim::Optimizer& optimizer, const TrainPosition& position) {
  Communicator& comm = fsdp.comm();
  const int rank = comm.rank(), world = comm.size();
  torch::serialize::OutputArchive shard_archive;
  std::vector<std::string> state_keys(fsdp.unit_count());
  for (size_t u = 0; u < fsdp.unit_count(); ++u) {
    const FlatLayout& layout = fsdp.layout(u);
    // Files always hold the rank's slice of the padded flat parameter.
    const int64_t offset = fsdp.sharded() ? 0 : rank * layout.shard_numel;
    auto slice = [&](const at::Tensor& t) { return t.detach().narrow(0, offset, layout.shard_numel).cpu(); };
    shard_archive.write(UnitKey(u) + "/param", slice(fsdp.shard(u)));
    auto state = GetParamState(optimizer, fsdp.shard(u));
    if (!state.ok()) return state.status();
    for (const auto& [key, tensor] : *state) {
      shard_archive.write(UnitKey(u) + "/state/" + key, key == "step" ? tensor.cpu() : slice(tensor));
      state_keys[u] += key + ",";
    }
  }
  shard_archive.write("meta/step", CounterTensor(position.step));
  shard_archive.write("meta/world_size", CounterTensor(world));
  CTRUN_RETURN_IF_ERROR(SaveArchiveAtomically(shard_archive, ShardFile(dir, rank, world)));
  CTRUN_RETURN_IF_ERROR(WaitWork(comm.Barrier(), "barrier after writing checkpoint shards"));
  if (rank == 0) {
    torch::serialize::OutputArchive meta;
    meta.write("meta/step", CounterTensor(position.step));
    meta.write("meta/epoch", CounterTensor(position.epoch));
    meta.write("meta/epoch_consumed", CounterTensor(position.epoch_consumed));
    meta.write("meta/seed", CounterTensor(position.seed));
    meta.write("meta/world_size", CounterTensor(world));
    meta.write("meta/units", CounterTensor(static_cast<int64_t>(fsdp.unit_count())));
    for (size_t u = 0; u < fsdp.unit_count(); ++u) {
      meta.write(UnitKey(u) + "/signature", c10::IValue(Signature(fsdp.layout(u))));
      meta.write(UnitKey(u) + "/state_keys", c10::IValue(state_keys[u]));
    }
    CTRUN_RETURN_IF_ERROR(SaveArchiveAtomically(meta, dir + "/meta.pt"));
  }
  return WaitWork(comm.Barrier(), "barrier after writing checkpoint metadata");
}

Result<std::optional<TrainPosition>> LoadShardedCheckpoint(const std::string& dir,
                                                           FullyShardedDataParallel& fsdp,
                                                           torch::optim::Optimizer& optimizer) {
  const std::string meta_path = dir + "/meta.pt";
  std::error_code ec;
  if (!std::filesystem::exists(meta_path, ec)) return std::optional<TrainPosition>();
  const int rank = fsdp.comm().rank();
  TrainPosition position;
  std::vector<at::Tensor> params(fsdp.unit_count());
  std::vector<ParamState> states(fsdp.unit_count());
  try {
    torch::serialize::InputArchive meta;
    meta.load_from(meta_path);
    position.step = Meta(meta, "meta/step");
    position.epoch = Meta(meta, "meta/epoch");
    position.epoch_consumed = Meta(meta, "meta/epoch_consumed");
    position.seed = Meta(meta, "meta/seed");
    position.world_size = Meta(meta, "meta/world_size");
    const int old_world = static_cast<int>(position.world_size);
    if (Meta(meta, "meta/units") != static_cast<int64_t>(fsdp.unit_count())) {
      return ShardedUnloadable(dir, std::to_string(Meta(meta, "meta/units")) + " units saved, " +
                          std::to_string(fsdp.unit_count()) + " now (same model and --min-unit-params?)");
    }
    std::map<int, torch::serialize::InputArchive> shards;
    auto shard_file = [&](int q) -> torch::serialize::InputArchive& {
      auto it = shards.find(q);
      if (it != shards.end()) return it->second;
      const std::string path = ShardFile(dir, q, old_world);
      if (!std::filesystem::exists(path, ec)) throw std::runtime_error("'" + path + "' is missing");
      torch::serialize::InputArchive& archive = shards[q];
      archive.load_from(path);
      if (Meta(archive, "meta/step") != position.step) {
        throw std::runtime_error("'" + path + "' is from another save (step differs from meta.pt)");
      }
      return archive;
    };
    for (size_t u = 0; u < fsdp.unit_count(); ++u) {
      const FlatLayout& layout = fsdp.layout(u);
      if (MetaText(meta, UnitKey(u) + "/signature") != Signature(layout)) {
        return ShardedUnloadable(dir, "unit " + std::to_string(u) +
                                          " holds other parameters or shapes than this model's");
      }
      const HeldRange held = Held(fsdp, u, rank);
      const auto pieces = ReshardPlan(layout.numel, held.begin, held.end, old_world);
      const int64_t old_shard = (layout.numel + old_world - 1) / old_world;
      auto assemble = [&](const std::string& key) {
        at::Tensor out = at::zeros_like(fsdp.shard(u).detach());
        for (const auto& piece : pieces) {
          at::Tensor part;
          if (!shard_file(piece.from_rank).try_read(UnitKey(u) + "/" + key, part)) {
            throw std::runtime_error("'" + key + "' of unit " + std::to_string(u) + " missing");
          }
          out.narrow(0, held.into + piece.begin - held.begin, piece.end - piece.begin)
              .copy_(part.narrow(0, piece.begin - piece.from_rank * old_shard, piece.end - piece.begin));
        }
        return out;
      };
      params[u] = assemble("param");
      for (const std::string& key : Split(MetaText(meta, UnitKey(u) + "/state_keys"))) {
        if (key == "step") {
          at::Tensor step;
          if (!shard_file(0).try_read(UnitKey(u) + "/state/step", step)) throw std::runtime_error("step missing");
          states[u][key] = step;
        } else {
          states[u][key] = assemble("state/" + key);
        }
      }
    }
  } catch (const std::exception& error) {
    return ShardedUnloadable(dir, TorchErrorLine(error));
  }
  CTRUN_RETURN_IF_ERROR(fsdp.Reshard());
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < fsdp.unit_count(); ++u) {
    at::Tensor shard = fsdp.shard(u);
    shard.detach().copy_(params[u]);
    CTRUN_RETURN_IF_ERROR(SetParamState(optimizer, shard, states[u]));
  }
  return std::optional<TrainPosition>(position);
}

namespace {

// Every parameter of the unsharded model and its optimizer state, by name
// (collective: every rank takes part and gets the whole).
struct FullState {
  std::map<std::string, at::Tensor> params;
  std::map<std::string, ParamState> states;
};

Result<FullState> GatherFullState(FullyShardedDataParallel& fsdp, torch::optim::Optimizer& optimizer) {
  Communicator& comm = fsdp.comm();
  auto gather = [&](const at::Tensor& local, at::Tensor& full) -> Status {
    if (!fsdp.sharded()) {
      full = local.detach();
      return Status::Ok();
    }
    at::Tensor send = local.detach().contiguous();
    full = at::empty({send.numel() * comm.size()}, send.options());
    return WaitWork(comm.AllGather(send, full), "all-gather for the full checkpoint");
  };
  FullState out;
  for (size_t u = 0; u < fsdp.unit_count(); ++u) {
    at::Tensor full;
    CTRUN_RETURN_IF_ERROR(gather(fsdp.shard(u), full));
    auto state = GetParamState(optimizer, fsdp.shard(u));
    if (!state.ok()) return state.status();
    std::map<std::string, at::Tensor> full_state;
    for (const auto& [key, tensor] : *state) {
      if (key == "step") continue;
      CTRUN_RETURN_IF_ERROR(gather(tensor, full_state[key]));
    }
    for (const auto& entry : fsdp.layout(u).entries) {
      out.params[entry.name] = full.narrow(0, entry.offset, entry.numel).view(entry.shape).clone();
      for (const auto& [key, tensor] : *state) {
        out.states[entry.name][key] = key == "step" ? tensor.clone()
                                                    : full_state[key].narrow(0, entry.offset, entry.numel)
                                                          .view(entry.shape).clone();
      }
    }
  }
  return out;
}

// The submodule of `mirror` that owns dotted `name` (made on the way as
// plain modules), and the name's last part in `leaf`.
std::shared_ptr<torch::nn::Module> MirrorOwner(const std::shared_ptr<torch::nn::Module>& mirror,
                                               const std::string& name, std::string& leaf) {
  std::shared_ptr<torch::nn::Module> module = mirror;
  size_t start = 0;
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
    const std::string part = name.substr(start, dot - start);
    auto children = module->named_children();
    module = children.contains(part) ? children[part]
                                     : module->register_module(part, std::make_shared<torch::nn::Module>());
    start = dot + 1;
  }
  leaf = name.substr(start);
  return module;
}

}  // namespace

Status SaveFullCheckpoint(const std::string& path, const std::string& model_path,
                          torch::nn::Module& root, FullyShardedDataParallel& fsdp,
                          torch::optim::Optimizer& optimizer, const TrainPosition& position) {
  at::NoGradGuard no_grad;
  auto gathered = GatherFullState(fsdp, optimizer);
  if (!gathered.ok()) return gathered.status();
  if (fsdp.comm().rank() != 0) return Status::Ok();
  std::map<std::string, at::Tensor>& params = gathered->params;
  std::map<std::string, ParamState>& states = gathered->states;

  // A plain module with the root's names: the state dict of the unsharded model.
  auto mirror = std::make_shared<torch::nn::Module>();
  std::vector<at::Tensor> mirror_params;
  std::vector<std::string> mirror_names;
  for (const auto& item : root.named_parameters(true)) {
    std::string leaf;
    auto module = MirrorOwner(mirror, item.key(), leaf);
    if (!params.count(item.key())) continue;
    mirror_params.push_back(module->register_parameter(leaf, params[item.key()]));
    mirror_names.push_back(item.key());
  }
  for (const auto& item : root.named_buffers(true)) {
    std::string leaf;
    MirrorOwner(mirror, item.key(), leaf)->register_buffer(leaf, item.value().detach().clone());
  }
  auto full_optimizer = MakeOptimizerLike(optimizer, mirror_params);
  if (!full_optimizer.ok()) return full_optimizer.status();
  for (size_t i = 0; i < mirror_params.size(); ++i) {
    CTRUN_RETURN_IF_ERROR(SetParamState(**full_optimizer, mirror_params[i], states[mirror_names[i]]));
  }
  CTRUN_RETURN_IF_ERROR(SaveCheckpoint(path, *mirror, **full_optimizer, position));
  if (!model_path.empty()) {
    try {
      torch::save(mirror, model_path);
    } catch (const std::exception& error) {
      return Status::IOError("cannot write model '" + model_path + "': " + TorchErrorLine(error));
    }
  }
  return Status::Ok();
}

}  // namespace ctrun::trainer
