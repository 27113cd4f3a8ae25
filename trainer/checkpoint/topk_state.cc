#include "trainer/checkpoint/topk_state.h"

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "trainer/checkpoint/archive_file.h"
#include "trainer/checkpoint/remove_tree.h"
#include "trainer/comm/torch_error.h"

namespace ctrun::trainer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStepPrefix = "step-";

Status BadTopkState(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("top-k state '" + path + "' " + why + "; remove its directory '" +
                                 fs::path(path).parent_path().string() +
                                 "' to restart error feedback from zero");
}

std::string Shape(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? "," : "") + std::to_string(t.size(i));
  return out + "]";
}

// A 0-dim integer counter `key` of `archive`, or nullopt.
std::optional<int64_t> ReadCounter(torch::serialize::InputArchive& archive, const std::string& key) {
  at::Tensor value;
  if (!archive.try_read(key, value) || value.numel() != 1 || value.is_floating_point()) return std::nullopt;
  return value.item<int64_t>();
}

// Checks the file's meta counters against what the caller expects.
Status CheckMeta(torch::serialize::InputArchive& archive, const std::string& path, int64_t step, int rank,
                 int world, const TopkState& like, TopkState& out) {
  const std::pair<const char*, int64_t> expected[] = {{"meta/step", step},
                                                      {"meta/rank", rank},
                                                      {"meta/world_size", world},
                                                      {"meta/count", static_cast<int64_t>(like.names.size())}};
  for (const auto& [key, want] : expected) {
    auto got = ReadCounter(archive, key);
    if (!got) return BadTopkState(path, std::string("has no \"") + key + "\"");
    if (*got != want) {
      return BadTopkState(path, std::string("does not match: \"") + key + "\" is " + std::to_string(*got) +
                                    ", expected " + std::to_string(want));
    }
  }
  auto synced = ReadCounter(archive, "meta/synced_steps");
  if (!synced || *synced < 0) return BadTopkState(path, "has no valid \"meta/synced_steps\"");
  out.synced_steps = *synced;
  return Status::Ok();
}

// Reads "<prefix><name>" for every name of `like` into `out`, checking shapes.
Status ReadTensors(torch::serialize::InputArchive& archive, const std::string& path, const std::string& prefix,
                   const std::vector<at::Tensor>& like, const std::vector<std::string>& names,
                   std::vector<at::Tensor>& out) {
  for (size_t i = 0; i < names.size(); ++i) {
    at::Tensor value;
    const std::string key = prefix + names[i];
    if (!archive.try_read(key, value)) return BadTopkState(path, "has no \"" + key + "\"");
    if (value.sizes() != like[i].sizes() || value.scalar_type() != at::kFloat) {
      return BadTopkState(path, "does not match this model: \"" + key + "\" is " + Shape(value) + " " +
                                    c10::toString(value.scalar_type()) + ", expected " + Shape(like[i]) +
                                    " Float");
    }
    out.push_back(value);
  }
  return Status::Ok();
}

// Copies `from` into `into`'s views.
void CopyInto(const TopkState& from, TopkState& into) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < into.names.size(); ++i) {
    into.momentum[i].copy_(from.momentum[i]);
    into.residual[i].copy_(from.residual[i]);
  }
  into.synced_steps = from.synced_steps;
}

// The mean over the `saved_world` ranks' files at `step`; all must agree on
// the warm-up count.
Result<TopkState> MeanOverRanks(const std::string& dir, int64_t step, int saved_world, const TopkState& like) {
  TopkState mean;
  for (int r = 0; r < saved_world; ++r) {
    const std::string path = TopkStatePath(dir, step, r);
    auto read = ReadTopkState(path, step, r, saved_world, like);
    if (!read.ok()) return read.status();
    if (r == 0) {
      mean = std::move(*read);
      continue;
    }
    if (read->synced_steps != mean.synced_steps) {
      return BadTopkState(path, "does not match rank 0's file: \"meta/synced_steps\" is " +
                                    std::to_string(read->synced_steps) + ", rank 0's " +
                                    std::to_string(mean.synced_steps));
    }
    for (size_t i = 0; i < like.names.size(); ++i) {
      mean.momentum[i].add_(read->momentum[i]);
      mean.residual[i].add_(read->residual[i]);
    }
  }
  for (size_t i = 0; i < like.names.size(); ++i) {
    mean.momentum[i].div_(saved_world);
    mean.residual[i].div_(saved_world);
  }
  return mean;
}

}  // namespace

std::string TopkStateDir(const std::string& dir, int64_t step) {
  return dir + "/topk/" + kStepPrefix + std::to_string(step);
}

std::string TopkStatePath(const std::string& dir, int64_t step, int rank) {
  return TopkStateDir(dir, step) + "/rank-" + std::to_string(rank) + ".pt";
}

Status SaveTopkState(const TopkState& state, const std::string& path, int64_t step, int rank, int world) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) return Status::IOError("cannot create directory '" + parent.string() + "': " + ec.message());
  try {
    torch::serialize::OutputArchive archive;
    archive.write("meta/step", CounterTensor(step));
    archive.write("meta/rank", CounterTensor(rank));
    archive.write("meta/world_size", CounterTensor(world));
    archive.write("meta/synced_steps", CounterTensor(state.synced_steps));
    archive.write("meta/count", CounterTensor(static_cast<int64_t>(state.names.size())));
    for (size_t i = 0; i < state.names.size(); ++i) {
      archive.write("u/" + state.names[i], state.momentum[i].detach().cpu().contiguous());
      archive.write("v/" + state.names[i], state.residual[i].detach().cpu().contiguous());
    }
    return SaveArchiveAtomically(archive, path);
  } catch (const std::exception& error) {
    return Status::IOError("cannot serialize top-k state '" + path + "': " + TorchErrorLine(error));
  }
}

Result<TopkState> ReadTopkState(const std::string& path, int64_t step, int rank, int world,
                                const TopkState& like) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return BadTopkState(path, "is missing");
  }
  TopkState out;
  out.names = like.names;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    CTRUN_RETURN_IF_ERROR(CheckMeta(archive, path, step, rank, world, like, out));
    CTRUN_RETURN_IF_ERROR(ReadTensors(archive, path, "u/", like.momentum, like.names, out.momentum));
    CTRUN_RETURN_IF_ERROR(ReadTensors(archive, path, "v/", like.residual, like.names, out.residual));
  } catch (const std::exception& error) {
    return BadTopkState(path, "is unreadable (corrupt or truncated): " + TorchErrorLine(error));
  }
  return out;
}

Result<TopkResume> ResumeTopkState(const std::string& dir, int64_t step, int saved_world, int rank, int world,
                                   TopkState& into) {
  std::error_code ec;
  const std::string state_dir = TopkStateDir(dir, step);
  TopkResume done;
  if (!fs::is_directory(state_dir, ec)) {
    done.line = "top-k: the checkpoint at step " + std::to_string(step) + " has no top-k state ('" + state_dir +
                "' is absent): error feedback and the " + "warm-up start from zero";
    return done;
  }
  if (saved_world == world) {
    auto read = ReadTopkState(TopkStatePath(dir, step, rank), step, rank, world, into);
    if (!read.ok()) return read.status();
    CopyInto(*read, into);
    done.kind = TopkResume::kExact;
    done.line = "top-k: restored each rank's residual and momentum from '" + state_dir + "' (" +
                std::to_string(into.synced_steps) + " synced steps toward the warm-up)";
    return done;
  }
  auto mean = MeanOverRanks(dir, step, saved_world, into);
  if (!mean.ok()) return mean.status();
  CopyInto(*mean, into);
  done.kind = TopkResume::kMean;
  done.line = "top-k: saved with " + std::to_string(saved_world) + " ranks, now " + std::to_string(world) +
              ": every rank starts from the mean of the saved ranks' residuals and momenta (the pending "
              "update is kept, its split across ranks is not); the warm-up count (" +
              std::to_string(into.synced_steps) + " synced steps) is kept";
  return done;
}

void RemoveOldTopkStates(const std::string& dir, int64_t step) {
  std::error_code ec;
  const fs::path root = fs::path(dir) / "topk";
  if (!fs::is_directory(root, ec)) return;
  std::vector<fs::path> old;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kStepPrefix, 0) != 0) continue;
    const std::string digits = name.substr(std::string(kStepPrefix).size());
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const int64_t n = std::stoll(digits);
    if (n < step) old.push_back(entry.path());
  }
  for (const auto& path : old) RemoveTree(path);
}

}  // namespace ctrun::trainer
