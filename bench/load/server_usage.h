// ServerUsage: a server process's CPU seconds and memory from /proc, for
// the load generators' reports (rdzv_load, ft_quorum_load, ft_floor_load);
// OwnUsage, the generator's own; JsonList, a report's list of numbers.
//
// Plain values; reads /proc and getrusage only; no threads.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace bench_load {

// CPU seconds (user + system) and memory; -1 where unknown (no pid, or
// the process is gone).
struct ServerUsage {
  double cpu_s = -1;
  long hwm_kib = -1;
  long rss_kib = -1;
};

ServerUsage ReadServerUsage(long pid);

// This process's CPU seconds (user + system) and peak RSS (getrusage).
struct OwnUsage {
  double cpu_s = 0;
  long hwm_kib = 0;
};

OwnUsage ReadOwnUsage();

// "[a, b, c]": `values` as a JSON list of numbers.
template <class T>
std::string JsonList(const std::vector<T>& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

}  // namespace bench_load
