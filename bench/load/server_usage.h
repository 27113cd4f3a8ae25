// ServerUsage: a server process's CPU seconds and memory from /proc, for
// the load generators' reports (rdzv_load, ft_quorum_load).
//
// Plain values; reads /proc only; no threads.
#pragma once

namespace bench_load {

// CPU seconds (user + system) and memory; -1 where unknown (no pid, or
// the process is gone).
struct ServerUsage {
  double cpu_s = -1;
  long hwm_kib = -1;
  long rss_kib = -1;
};

ServerUsage ReadServerUsage(long pid);

}  // namespace bench_load
