// Another process's memory, read from outside (process_vm_readv: the
// ptrace access a gdb attach needs, without stopping the process or
// writing to it), and the files it has mapped (/proc/PID/maps).
// Thread model: a ProcessMemory may be used from one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ctrun::launcher {

// One line of /proc/PID/maps that maps a file.
struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;  // in the file
  std::string path;     // as the process sees it ("" for anonymous memory)
};

// The lines of a /proc/PID/maps text; malformed lines are skipped. Pure.
std::vector<Mapping> ParseMaps(std::string_view text);

// /proc/PID/maps, parsed. IOError naming the file when it cannot be read
// (the process is gone, or ptrace access is refused).
Result<std::vector<Mapping>> ReadMaps(pid_t pid);

class ProcessMemory {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}

  // Copies `n` bytes at `addr` in the process into `out`; false when any of
  // them cannot be read (unmapped, or access refused). `out` is then
  // unspecified.
  bool Read(uint64_t addr, void* out, size_t n) const;

  template <typename T>
  std::optional<T> Value(uint64_t addr) const {
    T v{};
    if (!Read(addr, &v, sizeof v)) return std::nullopt;
    return v;
  }

  // Up to `n` bytes at `addr`, fewer when the readable memory ends sooner
  // (empty when none can be read).
  std::string ReadUpTo(uint64_t addr, size_t n) const;

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

}  // namespace ctrun::launcher
