// What store_load measures and prints: see store_load_report.h.
#include "store_load_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace store_load {

Cpu ServerCpu(int pid) {
  if (pid <= 0) return {};
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) {
    std::fprintf(stderr, "store_load: cannot read /proc/%d/stat (is the server running?)\n", pid);
    std::exit(1);
  }
  std::istringstream rest(line.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 0; i < 13 && rest >> field; ++i) {  // fields 3.. of stat(5)
    if (i == 11) utime = std::stoull(field);
    if (i == 12) stime = std::stoull(field);
  }
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return Cpu{static_cast<double>(utime + stime) / tick, static_cast<double>(stime) / tick};
}

rlim_t RaiseFdLimit(size_t fds) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < fds) {
    const rlim_t old = lim.rlim_cur;
    lim.rlim_cur = std::min<rlim_t>(fds, lim.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) {
      std::fprintf(stderr, "store_load: raised the open-files limit from %llu to %llu (hard %llu)\n",
                   static_cast<unsigned long long>(old), static_cast<unsigned long long>(lim.rlim_cur),
                   static_cast<unsigned long long>(lim.rlim_max));
    }
    getrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_cur < fds) {
      std::fprintf(stderr, "store_load: %zu connections need %zu open files; the hard limit is %llu\n",
                   fds - 16, fds, static_cast<unsigned long long>(lim.rlim_max));
      std::exit(1);
    }
  }
  return lim.rlim_cur;
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t at = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(at), v.end());
  return v[at];
}

std::string Json(const std::vector<std::pair<std::string, double>>& fields) {
  std::string s = "{";
  for (const auto& [k, v] : fields) {
    if (s.size() > 1) s += ", ";
    char num[64];
    std::snprintf(num, sizeof(num), "%.9g", v);
    s += "\"" + k + "\": " + num;
  }
  return s + "}";
}

double Since(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace store_load
