#include "trainer/checkpoint/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace ctrun::trainer {
namespace {

int RemoveTreeEntry(const char* path, const struct stat*, int, struct FTW*) {
  std::remove(path);  // a failure shows in the final check
  return 0;           // go on with the rest
}

}  // namespace

bool RemoveTree(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  nftw(path.c_str(), RemoveTreeEntry, 16, FTW_DEPTH | FTW_PHYS);
  return lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

}  // namespace ctrun::trainer
