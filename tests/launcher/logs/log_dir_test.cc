#include "launcher/logs/log_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed at scope exit.
struct ScratchDir {
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "log_dir_test_XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

// Points TMPDIR at `dir` for the scope, as ctrun reads it.
struct TmpdirOverride {
  explicit TmpdirOverride(const fs::path& dir) {
    if (const char* old = std::getenv("TMPDIR")) saved = old;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TmpdirOverride() {
    if (saved.empty()) ::unsetenv("TMPDIR");
    else ::setenv("TMPDIR", saved.c_str(), 1);
  }
  std::string saved;
};

TEST_CASE("PrepareAttempt makes one directory per local rank") {
  ScratchDir scratch;
  Result<RunLogDir> dir = RunLogDir::Create(scratch.path.string(), "job");
  REQUIRE(dir.ok());
  REQUIRE(dir->PrepareAttempt(0, 3).ok());
  for (int lr = 0; lr < 3; ++lr) CHECK(fs::is_directory(dir->RankDir(0, lr)));
  CHECK_FALSE(fs::exists(dir->RankDir(0, 3)));
}

TEST_CASE("PrepareAttempt on an attempt that exists wipes it") {
  ScratchDir scratch;
  Result<RunLogDir> dir = RunLogDir::Create(scratch.path.string(), "job");
  REQUIRE(dir.ok());
  REQUIRE(dir->PrepareAttempt(0, 2).ok());
  std::ofstream(dir->ErrorFile(0, 1)) << "{}";
  REQUIRE(dir->PrepareAttempt(0, 2).ok());
  CHECK(fs::is_directory(dir->RankDir(0, 1)));
  CHECK_FALSE(fs::exists(dir->ErrorFile(0, 1)));
}

TEST_CASE("the temporary base is removed, empty or not, and --log-dir is kept") {
  ScratchDir scratch;
  TmpdirOverride tmpdir(scratch.path);
  for (bool with_file : {false, true}) {
    Result<RunLogDir> dir = RunLogDir::Create(std::nullopt, "job");
    REQUIRE(dir.ok());
    REQUIRE(dir->temporary());
    REQUIRE(dir->PrepareAttempt(0, 2).ok());
    REQUIRE(dir->PrepareAttempt(1, 2).ok());
    if (with_file) std::ofstream(dir->StdoutFile(1, 0)) << "log line\n";
    dir->RemoveIfTemporary();
    CHECK(fs::is_empty(scratch.path));
  }
  // A directory ctrun did not make (a worker's own) takes the full walk.
  Result<RunLogDir> nested = RunLogDir::Create(std::nullopt, "job");
  REQUIRE(nested.ok());
  REQUIRE(nested->PrepareAttempt(0, 2).ok());
  fs::create_directories(fs::path(nested->RankDir(0, 1)) / "profile" / "trace");
  std::ofstream(fs::path(nested->RankDir(0, 1)) / "profile" / "trace" / "t.json") << "{}";
  std::ofstream(nested->FilteredStdoutFile(0)) << "loss 1\n";
  nested->RemoveIfTemporary();
  CHECK(fs::is_empty(scratch.path));

  Result<RunLogDir> kept = RunLogDir::Create((scratch.path / "logs").string(), "job");
  REQUIRE(kept.ok());
  REQUIRE(kept->PrepareAttempt(0, 1).ok());
  kept->RemoveIfTemporary();
  CHECK(fs::is_directory(kept->RankDir(0, 0)));
}

}  // namespace
}  // namespace ctrun::launcher
