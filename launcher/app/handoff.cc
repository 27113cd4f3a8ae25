#include "launcher/app/handoff.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ctrun::launcher {

std::string FullProgramPath() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "ctrun-full";  // no /proc: execv fails and says so
  std::string path(self, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "ctrun-full";
}

void HandOffToFull(char** argv, const std::string& what) {
  const std::string path = FullProgramPath();
  std::fflush(nullptr);
  ::execv(path.c_str(), argv);
  const int err = errno;
  std::fprintf(stderr,
               "ctrun: error: %s runs in ctrun-full, and %s cannot be run (%s): reinstall ctrun, "
               "whose package puts ctrun-full beside it\n",
               what.c_str(), path.c_str(), std::strerror(err));
}

std::string WhatNeedsFull(const LaunchConfig& c) {
  const std::string nodes = c.min_nodes == c.max_nodes
                                ? std::to_string(c.max_nodes)
                                : std::to_string(c.min_nodes) + ":" + std::to_string(c.max_nodes);
  if (c.ft) return "a fault-tolerant launch (--ft-replicas)";
  return c.is_single_node() ? "a launch with --rdzv-backend c10d and --rdzv-endpoint"
                            : "a launch of several nodes (--nnodes " + nodes + ")";
}

}  // namespace ctrun::launcher
