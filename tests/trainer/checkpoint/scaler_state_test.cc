// The loss scaler's checkpoint file (scaler_state.h): the round trip, a
// missing file, and one-line errors for corrupt, truncated and invalid files.

#include <ATen/ATen.h>
#include <torch/serialize/output-archive.h>
#include "tests/trainer/catch_after_torch.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "trainer/checkpoint/scaler_state.h"

namespace ct = ctrun::trainer;
namespace fs = std::filesystem;

namespace {

struct Dir {
  Dir() : path(fs::temp_directory_path() / ("ctrun_scaler_" + std::to_string(::getpid()))) { fs::remove_all(path); }
  ~Dir() { fs::remove_all(path); }
  fs::path path;
};

ct::GradScaler Fresh() {
  auto scaler = ct::GradScaler::Create({}, nullptr);
  REQUIRE(scaler.ok());
  return std::move(*scaler);
}

// A scaler in a state no fresh one has: scale 1024, tracker 7, 3 skipped.
ct::GradScaler Used() {
  ct::GradScaler scaler = Fresh();
  ct::GradScalerState state = scaler.ToState();
  state["scale"] = at::tensor(1024.0, at::kDouble);
  state["_growth_tracker"] = at::tensor(int64_t{7}, at::kLong);
  REQUIRE(scaler.FromState(state).ok());
  scaler.RestoreSkippedSteps(3);
  return scaler;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void CheckUntouched(const ct::GradScaler& scaler) {
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.skipped_steps() == 0);
}

}  // namespace

TEST_CASE("ScalerState: the path is step-<N>/scaler.pt in the checkpoint directory") {
  CHECK(ct::ScalerStatePath("/ck", 40) == "/ck/step-40/scaler.pt");
}

TEST_CASE("ScalerState: scale, growth tracker and skipped steps round-trip, and no .tmp is left") {
  Dir dir;
  const std::string path = ct::ScalerStatePath(dir.path.string(), 20);
  REQUIRE(ct::SaveScalerState(Used(), path).ok());
  CHECK(fs::exists(path));
  CHECK(!fs::exists(path + ".tmp"));
  ct::GradScaler loaded = Fresh();
  auto result = ct::LoadScalerState(path, loaded);
  REQUIRE(result.ok());
  CHECK(*result);
  CHECK(loaded.scale() == 1024.0);
  CHECK(loaded.growth_tracker() == 7);
  CHECK(loaded.skipped_steps() == 3);
  CHECK(loaded.options().growth_interval == 2000);
  // Saving again replaces the file.
  REQUIRE(ct::SaveScalerState(Fresh(), path).ok());
  REQUIRE(ct::LoadScalerState(path, loaded).ok());
  CheckUntouched(loaded);
}

TEST_CASE("ScalerState: no file loads nothing and changes nothing") {
  Dir dir;
  ct::GradScaler scaler = Fresh();
  auto result = ct::LoadScalerState(ct::ScalerStatePath(dir.path.string(), 5), scaler);
  REQUIRE(result.ok());
  CHECK(!*result);
  CheckUntouched(scaler);
}

TEST_CASE("ScalerState: a corrupt or truncated file is a one-line error naming it, and changes nothing") {
  Dir dir;
  const std::string path = ct::ScalerStatePath(dir.path.string(), 10);
  REQUIRE(ct::SaveScalerState(Used(), path).ok());
  const std::string good = ReadAll(path);
  for (const std::string& bytes :
       {good.substr(0, good.size() / 2), std::string("not a torch archive"), std::string()}) {
    WriteAll(path, bytes);
    ct::GradScaler scaler = Fresh();
    auto result = ct::LoadScalerState(path, scaler);
    REQUIRE(!result.ok());
    const std::string message = result.status().message();
    CHECK(message.rfind("loss scaler state '" + path + "' is unreadable (corrupt or truncated): ", 0) == 0);
    CHECK(message.find('\n') == std::string::npos);
    CheckUntouched(scaler);
  }
}

TEST_CASE("ScalerState: a missing key or a value out of range is refused naming it") {
  Dir dir;
  fs::create_directories(dir.path);
  const std::string path = (dir.path / "scaler.pt").string();
  {
    torch::serialize::OutputArchive archive;
    archive.write("scale", at::tensor(2.0, at::kDouble));
    archive.save_to(path);
  }
  ct::GradScaler scaler = Fresh();
  auto missing = ct::LoadScalerState(path, scaler);
  REQUIRE(!missing.ok());
  CHECK(missing.status().message() == "loss scaler state '" + path +
                                          "' has no \"growth_factor\"; remove that step directory's scaler.pt "
                                          "to restart the scale at 65536");
  {
    torch::serialize::OutputArchive archive;
    for (const auto& [key, value] : Fresh().ToState()) archive.write(key, value);
    archive.write("_growth_tracker", at::tensor(int64_t{2000}, at::kLong));
    archive.write("skipped_steps", at::tensor(int64_t{0}, at::kLong));
    archive.save_to(path);
  }
  auto range = ct::LoadScalerState(path, scaler);
  REQUIRE(!range.ok());
  CHECK(range.status().message().find("_growth_tracker must be in [0, growth_interval), got 2000") !=
        std::string::npos);
  CheckUntouched(scaler);
}
