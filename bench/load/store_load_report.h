// What store_load measures and prints: the server's CPU time from
// /proc/PID/stat, its own open-files limit, latency percentiles, and the one
// JSON object it prints. Free functions; no threads.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace store_load {

using Clock = std::chrono::steady_clock;

// The CPU time `pid` has used, in seconds: all of it (utime + stime) and
// the kernel's part (stime); zeros without a pid.
struct Cpu {
  double total = 0;
  double sys = 0;
  Cpu operator-(const Cpu& o) const { return Cpu{total - o.total, sys - o.sys}; }
};

// Reads /proc/PID/stat; exits 1 (saying why on stderr) when it cannot.
Cpu ServerCpu(int pid);

// Raises the soft RLIMIT_NOFILE to cover `fds` (within the hard limit);
// exits 1 when the hard limit is too low. Returns the soft limit.
rlim_t RaiseFdLimit(size_t fds);

// The q-quantile of `v` (reorders it); 0 when empty.
double Percentile(std::vector<double>& v, double q);

// One JSON object of numbers, fields in the order given.
std::string Json(const std::vector<std::pair<std::string, double>>& fields);

// Seconds from a to b.
double Since(Clock::time_point a, Clock::time_point b);

}  // namespace store_load
