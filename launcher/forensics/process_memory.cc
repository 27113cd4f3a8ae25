#include "launcher/forensics/process_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ctrun::launcher {

std::vector<Mapping> ParseMaps(std::string_view text) {
  std::vector<Mapping> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string line(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    // start-end perms offset dev inode   path
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    char perms[8] = {};
    char dev[16] = {};
    int path_at = -1;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu %n", &start, &end, perms, &offset, dev,
                    &inode, &path_at) < 6) {
      continue;
    }
    Mapping m{start, end, offset, ""};
    if (path_at > 0 && static_cast<size_t>(path_at) <= line.size()) m.path = line.substr(path_at);
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::vector<Mapping>> ReadMaps(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) return Status::IOError("cannot read " + path);
  const std::string text = ss.str();
  if (text.empty()) return Status::IOError("cannot read " + path + " (the process is gone, or access is refused)");
  return ParseMaps(text);
}

bool ProcessMemory::Read(uint64_t addr, void* out, size_t n) const {
  if (n == 0) return true;
  if (addr == 0 || addr + n < addr) return false;
  iovec local{out, n};
  iovec remote{reinterpret_cast<void*>(addr), n};
  const ssize_t got = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  return got == static_cast<ssize_t>(n);
}

std::string ProcessMemory::ReadUpTo(uint64_t addr, size_t n) const {
  std::string out(n, '\0');
  if (n == 0 || addr == 0 || addr + n < addr) return "";
  iovec local{out.data(), n};
  iovec remote{reinterpret_cast<void*>(addr), n};
  ssize_t got = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (got < 0) {
    // The first page may be readable and the last not: read up to the page end.
    const uint64_t page_end = (addr | 4095) + 1;
    if (page_end - addr < n) return ReadUpTo(addr, page_end - addr);
    return "";
  }
  out.resize(static_cast<size_t>(got));
  return out;
}

}  // namespace ctrun::launcher
