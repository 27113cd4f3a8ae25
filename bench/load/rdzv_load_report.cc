// rdzv_load's measurements and checks: the server's usage from /proc, the
// rank check of a round, and the one JSON object printed at the end. See
// rdzv_load_driver.h.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rdzv_load_driver.h"
#include "server_usage.h"

namespace rdzv_load {

// Every agent still in the run has round `round`, with ranks 0..expect-1 once each.
std::string Load::CheckRanks(uint64_t round, int expect, const char* which) {
  std::vector<int> seen(expect, 0);
  for (auto& ap : agents_) {
    if (ap->dropped) continue;
    if (ap->round != round) return std::string(which) + ": agent " + std::to_string(ap->index) + " has no round";
    if (ap->rank < 0 || ap->rank >= expect || seen[ap->rank]++) {
      return std::string(which) + ": rank " + std::to_string(ap->rank) + " out of 0.." + std::to_string(expect - 1) +
             " or repeated";
    }
  }
  return "";
}

void Load::Report(bool ok) {
  const bench_load::OwnUsage self = bench_load::ReadOwnUsage();
  std::ostringstream j;
  j << "{\"ok\": " << (ok ? "true" : "false") << ", \"agents\": " << o_.agents << ", \"channels\": " << o_.channels
    << ", \"dropped\": " << o_.drop;
  for (auto& [name, v] : times_) j << ", \"" << name << "\": " << v;
  j << ", \"keep_alives\": " << keep_alives_ << ", \"keep_alive_errors\": " << keep_alive_errors_
    << ", \"load_cpu_s\": " << self.cpu_s << ", \"load_hwm_kib\": " << self.hwm_kib;
  j << ", \"server\": {";
  for (size_t i = 0; i < usage_.size(); ++i) {
    const ServerUsage& u = usage_[i].second;
    j << (i ? ", " : "") << "\"" << usage_[i].first << "\": {\"cpu_s\": " << u.cpu_s << ", \"hwm_kib\": " << u.hwm_kib
      << ", \"rss_kib\": " << u.rss_kib << "}";
  }
  j << "}";
  std::string err = error_;
  for (char& c : err) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '\'';
  }
  j << ", \"error\": \"" << err << "\"}";
  std::printf("%s\n", j.str().c_str());
  if (!ok) std::fprintf(stderr, "rdzv_load: %s\n", error_.c_str());
}

}  // namespace rdzv_load
