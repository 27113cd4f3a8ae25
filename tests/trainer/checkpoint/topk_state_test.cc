// Top-k compression's per-rank checkpoint files (topk_state.h): the round
// trip at the same world size, the mean at another, no state directory, a
// missing, corrupt or truncated file, wrong shapes, and the clean-up of
// older step directories.

#include <ATen/ATen.h>
#include "tests/trainer/catch_after_torch.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "trainer/checkpoint/topk_state.h"

namespace ct = ctrun::trainer;
namespace fs = std::filesystem;

namespace {

struct TopkDir {
  TopkDir() : path(fs::temp_directory_path() / ("ctrun_topk_state_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TopkDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
  fs::path path;
};

// Two parameters, "a.weight" [2, 3] and "b.bias" [4], their u and v filled
// from `seed` (zeros when seed is 0).
ct::TopkState MakeState(int seed, int64_t synced_steps = 0) {
  ct::TopkState state;
  state.synced_steps = synced_steps;
  state.names = {"a.weight", "b.bias"};
  for (const auto& shape : {std::vector<int64_t>{2, 3}, std::vector<int64_t>{4}}) {
    const int64_t n = shape.size() == 2 ? 6 : 4;
    state.momentum.push_back(at::arange(n, at::kFloat).mul(seed).reshape(shape));
    state.residual.push_back(at::arange(n, at::kFloat).mul(-0.5 * seed).reshape(shape));
  }
  return state;
}

bool Same(const ct::TopkState& a, const ct::TopkState& b) {
  if (a.names != b.names || a.synced_steps != b.synced_steps) return false;
  for (size_t i = 0; i < a.names.size(); ++i) {
    if (!a.momentum[i].equal(b.momentum[i]) || !a.residual[i].equal(b.residual[i])) return false;
  }
  return true;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace

TEST_CASE("TopkState: the files are topk/step-<N>/rank-<r>.pt in the checkpoint directory") {
  CHECK(ct::TopkStateDir("/ck", 40) == "/ck/topk/step-40");
  CHECK(ct::TopkStatePath("/ck", 40, 3) == "/ck/topk/step-40/rank-3.pt");
}

TEST_CASE("TopkState: each rank's u, v and warm-up count round-trip exactly at the same world size") {
  TopkDir dir;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = ct::TopkStatePath(dir.str(), 12, rank);
    REQUIRE(ct::SaveTopkState(MakeState(rank + 1, 12), path, 12, rank, 2).ok());
    CHECK(!fs::exists(path + ".tmp"));
  }
  ct::TopkState into = MakeState(0);
  auto resumed = ct::ResumeTopkState(dir.str(), 12, 2, 1, 2, into);
  REQUIRE(resumed.ok());
  CHECK(resumed->kind == ct::TopkResume::kExact);
  CHECK(resumed->line.find("restored each rank's residual and momentum") != std::string::npos);
  CHECK(Same(into, MakeState(2, 12)));
}

TEST_CASE("TopkState: at another world size every rank gets the mean of the saved ranks' state") {
  TopkDir dir;
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(ct::SaveTopkState(MakeState(2 * rank + 1, 7), ct::TopkStatePath(dir.str(), 7, rank), 7, rank, 2).ok());
  }
  for (int rank = 0; rank < 3; ++rank) {
    ct::TopkState into = MakeState(0);
    auto resumed = ct::ResumeTopkState(dir.str(), 7, 2, rank, 3, into);
    REQUIRE(resumed.ok());
    CHECK(resumed->kind == ct::TopkResume::kMean);
    CHECK(resumed->line.find("saved with 2 ranks, now 3") != std::string::npos);
    CHECK(Same(into, MakeState(2, 7)));  // the mean of seeds 1 and 3
  }
}

TEST_CASE("TopkState: a checkpoint without a top-k directory starts from zero") {
  TopkDir dir;
  ct::TopkState into = MakeState(0);
  auto resumed = ct::ResumeTopkState(dir.str(), 5, 2, 0, 2, into);
  REQUIRE(resumed.ok());
  CHECK(resumed->kind == ct::TopkResume::kNoState);
  CHECK(resumed->line.find("has no top-k state") != std::string::npos);
  CHECK(Same(into, MakeState(0)));
}

TEST_CASE("TopkState: a missing, corrupt or truncated rank file is a one-line error naming it") {
  TopkDir dir;
  REQUIRE(ct::SaveTopkState(MakeState(1, 3), ct::TopkStatePath(dir.str(), 3, 0), 3, 0, 2).ok());
  const std::string path = ct::TopkStatePath(dir.str(), 3, 1);
  ct::TopkState into = MakeState(0);
  auto missing = ct::ResumeTopkState(dir.str(), 3, 2, 1, 2, into);
  REQUIRE(!missing.ok());
  CHECK(missing.status().message() == "top-k state '" + path + "' is missing; remove its directory '" +
                                          ct::TopkStateDir(dir.str(), 3) + "' to restart error feedback from zero");
  REQUIRE(ct::SaveTopkState(MakeState(1, 3), path, 3, 1, 2).ok());
  const std::string good = ReadBytes(path);
  for (const std::string& bytes : {good.substr(0, good.size() / 2), std::string("not a torch archive")}) {
    WriteBytes(path, bytes);
    auto bad = ct::ResumeTopkState(dir.str(), 3, 2, 1, 2, into);
    REQUIRE(!bad.ok());
    const std::string message = bad.status().message();
    CHECK(message.rfind("top-k state '" + path + "' is unreadable (corrupt or truncated): ", 0) == 0);
    CHECK(message.find('\n') == std::string::npos);
    CHECK(Same(into, MakeState(0)));
  }
  // At another world size, every saved rank's file is read: rank 1's is bad.
  auto merged = ct::ResumeTopkState(dir.str(), 3, 2, 0, 1, into);
  REQUIRE(!merged.ok());
  CHECK(merged.status().message().find(path) != std::string::npos);
}

TEST_CASE("TopkState: wrong shapes, another model or another step are refused, changing nothing") {
  TopkDir dir;
  const std::string path = ct::TopkStatePath(dir.str(), 4, 0);
  ct::TopkState other = MakeState(1, 4);
  other.momentum[1] = at::zeros({5});
  other.residual[1] = at::zeros({5});
  REQUIRE(ct::SaveTopkState(other, path, 4, 0, 1).ok());
  ct::TopkState into = MakeState(0);
  auto shape = ct::ReadTopkState(path, 4, 0, 1, into);
  REQUIRE(!shape.ok());
  CHECK(shape.status().message().find("does not match this model: \"u/b.bias\" is [5] Float, expected [4] Float") !=
        std::string::npos);

  ct::TopkState renamed = MakeState(1, 4);
  renamed.names[0] = "c.weight";
  REQUIRE(ct::SaveTopkState(renamed, path, 4, 0, 1).ok());
  auto name = ct::ReadTopkState(path, 4, 0, 1, into);
  REQUIRE(!name.ok());
  CHECK(name.status().message().find("has no \"u/a.weight\"") != std::string::npos);

  REQUIRE(ct::SaveTopkState(MakeState(1, 4), path, 4, 0, 1).ok());
  auto step = ct::ReadTopkState(path, 5, 0, 1, into);
  REQUIRE(!step.ok());
  CHECK(step.status().message().find("\"meta/step\" is 4, expected 5") != std::string::npos);
  CHECK(Same(into, MakeState(0)));
}

TEST_CASE("TopkState: after a commit only older step directories are removed") {
  TopkDir dir;
  for (int64_t step : {5, 10, 15}) {
    REQUIRE(ct::SaveTopkState(MakeState(1, step), ct::TopkStatePath(dir.str(), step, 0), step, 0, 1).ok());
  }
  ct::RemoveOldTopkStates(dir.str(), 10);
  CHECK(!fs::exists(ct::TopkStateDir(dir.str(), 5)));
  CHECK(fs::exists(ct::TopkStateDir(dir.str(), 10)));
  CHECK(fs::exists(ct::TopkStateDir(dir.str(), 15)));
  ct::RemoveOldTopkStates(dir.str(), 16);
  CHECK(!fs::exists(ct::TopkStateDir(dir.str(), 10)));
  CHECK(!fs::exists(ct::TopkStateDir(dir.str(), 15)));
  ct::RemoveOldTopkStates((dir.path / "absent").string(), 20);  // no topk/ folder: nothing to do
}
