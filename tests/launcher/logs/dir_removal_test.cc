#include "launcher/logs/dir_removal.h"

#include <linux/magic.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed at scope exit.
struct RemovalScratchDir {
  RemovalScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "dir_removal_test_XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~RemovalScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

// This process's open descriptors.
size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// a/{0,1,2} made under `root`, listed children first, then a.
std::vector<std::string> MakeTree(const fs::path& root) {
  std::vector<std::string> dirs;
  for (int i = 0; i < 3; ++i) {
    fs::create_directories(root / "a" / std::to_string(i));
    dirs.push_back((root / "a" / std::to_string(i)).string());
  }
  dirs.push_back((root / "a").string());
  return dirs;
}

TEST_CASE("ThreadsFor: none where nothing waits, one per descriptor up to the cap") {
  CHECK(DirRemoval::ThreadsFor(11, false, 16) == 0);
  CHECK(DirRemoval::ThreadsFor(0, true, 16) == 0);
  CHECK(DirRemoval::ThreadsFor(1, true, 16) == 0);
  CHECK(DirRemoval::ThreadsFor(2, true, 16) == 2);
  CHECK(DirRemoval::ThreadsFor(11, true, 16) == 11);
  CHECK(DirRemoval::ThreadsFor(67, true, 16) == 16);
}

TEST_CASE("MayWait: memory file systems never wait, disks may") {
  CHECK_FALSE(DirRemoval::MayWait(static_cast<long>(TMPFS_MAGIC)));
  CHECK_FALSE(DirRemoval::MayWait(static_cast<long>(RAMFS_MAGIC)));
  CHECK(DirRemoval::MayWait(static_cast<long>(EXT4_SUPER_MAGIC)));
  CHECK(DirRemoval::MayWait(static_cast<long>(XFS_SUPER_MAGIC)));
}

// Every way of letting go: the kernel (io_uring, or threads where it is
// refused) and threads, on the scratch directory's own file system, and on
// /dev/shm (tmpfs: closed inline) where it exists.
TEST_CASE("Remove takes every name at once and closes every descriptor by Wait") {
  std::vector<fs::path> roots = {fs::temp_directory_path()};
  if (fs::is_directory("/dev/shm")) roots.push_back("/dev/shm");
  for (const fs::path& root : roots) {
    for (DirRemoval::Release release : {DirRemoval::Release::kKernel, DirRemoval::Release::kThreads}) {
      INFO(root << (release == DirRemoval::Release::kKernel ? " kernel" : " threads"));
      std::string pattern = (root / "dir_removal_test_XXXXXX").string();
      const fs::path scratch = ::mkdtemp(pattern.data());
      const size_t before = OpenDescriptors();
      {
        DirRemoval removal(release);
        std::vector<std::string> dirs = MakeTree(scratch);
        std::ofstream(fs::path(dirs[1]) / "stdout.log") << "a line\n";  // emptied on the way
        std::ofstream(fs::path(dirs[1]) / "stderr.log");
        ::mkfifo((fs::path(dirs[2]) / "fifo").c_str(), 0600);  // unlinked, never opened
        CHECK(removal.Remove(dirs));
        CHECK(fs::is_empty(scratch));  // the names are gone before any wait
        removal.Wait();
        CHECK(OpenDescriptors() == before);
        removal.Wait();  // idempotent
      }
      CHECK(OpenDescriptors() == before);
      fs::remove(scratch);
    }
  }
}

TEST_CASE("Remove stops at a directory it cannot remove and says so") {
  RemovalScratchDir scratch;
  const size_t before = OpenDescriptors();
  std::vector<std::string> dirs = MakeTree(scratch.path);
  fs::create_directories(fs::path(dirs[2]) / "nested");  // not in the list: not followed
  std::ofstream(fs::path(dirs[2]) / "nested" / "f");
  {
    DirRemoval removal;
    CHECK_FALSE(removal.Remove(dirs));
  }  // the destructor waits
  CHECK_FALSE(fs::exists(dirs[0]));
  CHECK_FALSE(fs::exists(dirs[1]));
  CHECK(fs::exists(fs::path(dirs[2]) / "nested" / "f"));
  CHECK(fs::exists(dirs[3]));
  CHECK(OpenDescriptors() == before);
}

TEST_CASE("Remove of a directory that is not there returns false and leaves the rest") {
  RemovalScratchDir scratch;
  std::vector<std::string> dirs = MakeTree(scratch.path);
  fs::remove(dirs[0]);
  DirRemoval removal;
  CHECK_FALSE(removal.Remove(dirs));
  CHECK(fs::exists(dirs[1]));
  CHECK(fs::exists(dirs[3]));
}

TEST_CASE("Remove does not follow a symbolic link in place of a directory") {
  RemovalScratchDir scratch;
  std::vector<std::string> dirs = MakeTree(scratch.path);
  fs::create_directory(scratch.path / "elsewhere");
  std::ofstream(scratch.path / "elsewhere" / "keep");
  fs::remove(dirs[0]);
  fs::create_directory_symlink(scratch.path / "elsewhere", dirs[0]);
  DirRemoval removal;
  CHECK_FALSE(removal.Remove(dirs));
  CHECK(fs::exists(scratch.path / "elsewhere" / "keep"));
}

}  // namespace
}  // namespace ctrun::launcher
