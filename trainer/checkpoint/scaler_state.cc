#include "trainer/checkpoint/scaler_state.h"

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>

#include "trainer/checkpoint/archive_file.h"
#include "trainer/comm/torch_error.h"

namespace ctrun::trainer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSkipped = "skipped_steps";
constexpr const char* kKeys[] = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"};

Status BadScalerState(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("loss scaler state '" + path + "' " + why +
                                 "; remove that step directory's scaler.pt to restart the scale at 65536");
}

}  // namespace

std::string ScalerStatePath(const std::string& dir, int64_t step) {
  return dir + "/step-" + std::to_string(step) + "/scaler.pt";
}

Status SaveScalerState(const GradScaler& scaler, const std::string& path) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) return Status::IOError("cannot create directory '" + parent.string() + "': " + ec.message());
  torch::serialize::OutputArchive archive;
  for (const auto& [key, value] : scaler.ToState()) archive.write(key, value);
  archive.write(kSkipped, at::tensor(scaler.skipped_steps(), at::kLong));
  return SaveArchiveAtomically(archive, path);
}

Result<bool> LoadScalerState(const std::string& path, GradScaler& scaler) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  GradScalerState state;
  at::Tensor skipped;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    for (const char* key : kKeys) {
      at::Tensor value;
      if (!archive.try_read(key, value)) return BadScalerState(path, std::string("has no \"") + key + "\"");
      state[key] = value;
    }
    if (!archive.try_read(kSkipped, skipped)) return BadScalerState(path, std::string("has no \"") + kSkipped + "\"");
  } catch (const std::exception& error) {
    return BadScalerState(path, "is unreadable (corrupt or truncated): " + TorchErrorLine(error));
  }
  if (skipped.numel() != 1 || skipped.is_floating_point() || skipped.item<int64_t>() < 0) {
    return BadScalerState(path, "has a bad \"skipped_steps\" (one integer >= 0 expected)");
  }
  GradScaler trial = scaler;
  Status loaded = trial.FromState(state);
  if (!loaded.ok()) return BadScalerState(path, "is invalid: " + loaded.message());
  trial.RestoreSkippedSteps(skipped.item<int64_t>());
  scaler = trial;
  return true;
}

}  // namespace ctrun::trainer
