#include "server_usage.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace bench_load {

ServerUsage ReadServerUsage(long pid) {
  ServerUsage u;
  if (pid <= 0) return u;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after the ")" that ends the command name: state is field 3;
    // utime and stime are fields 14 and 15.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int f = 3; f <= 15 && rest >> field; ++f) {
      if (f >= 14) ticks += std::stod(field);
    }
    u.cpu_s = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) u.hwm_kib = std::atol(line.c_str() + 6);
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kib = std::atol(line.c_str() + 6);
  }
  return u;
}

OwnUsage ReadOwnUsage() {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  return OwnUsage{.cpu_s = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                           static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6,
                  .hwm_kib = self.ru_maxrss};
}

}  // namespace bench_load
