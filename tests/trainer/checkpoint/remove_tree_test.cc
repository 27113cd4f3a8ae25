// RemoveTree: rm -rf through nftw (not std::filesystem::remove_all).
#include "trainer/checkpoint/remove_tree.h"

#include <catch2/catch.hpp>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

std::string TempDir() {
  char tmpl[] = "/tmp/ctrun-remove-tree-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

}  // namespace

TEST_CASE("RemoveTree: removes a tree, follows no link out of it, and a missing path is fine") {
  const std::string root = TempDir();
  const std::string outside = TempDir();
  std::ofstream(outside + "/keep") << "x";
  const std::string tree = root + "/step-3";
  REQUIRE(mkdir(tree.c_str(), 0700) == 0);
  REQUIRE(mkdir((tree + "/a").c_str(), 0700) == 0);
  std::ofstream(tree + "/a/shard.pt") << "data";
  std::ofstream(tree + "/meta.pt") << "meta";
  REQUIRE(symlink(outside.c_str(), (tree + "/link").c_str()) == 0);

  CHECK(ctrun::trainer::RemoveTree(tree));
  CHECK(!Exists(tree));
  CHECK(Exists(root));
  CHECK(Exists(outside + "/keep"));  // the link went, not what it pointed to
  CHECK(ctrun::trainer::RemoveTree(tree));  // nothing there: nothing to do
  CHECK(ctrun::trainer::RemoveTree(root));
  CHECK(ctrun::trainer::RemoveTree(outside));
  CHECK(!Exists(outside));
}
