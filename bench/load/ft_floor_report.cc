// ft_floor_load's report: one JSON object in ft_quorum_load's shape (see
// ft_floor_load.cc).
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "ft_floor_clients.h"
#include "server_usage.h"

namespace ft_floor_load {

void FloorClients::Report(bool ok) const {
  const bench_load::OwnUsage self = bench_load::ReadOwnUsage();
  const int world = ok ? o_.groups : 0;
  std::ostringstream j;
  j << "{\"ok\": " << (ok ? "true" : "false") << ", \"groups\": " << o_.groups << ", \"channels\": " << o_.groups
    << ", \"steps\": " << latency_s_.size() << ", \"step_s\": " << o_.step_s
    << ", \"losses\": 0, \"held_back\": 0, \"lost_events\": 0, \"min_world\": " << world
    << ", \"max_world\": " << world << ", \"latency_s\": " << bench_load::JsonList(latency_s_)
    << ", \"server_cpu_s\": " << bench_load::JsonList(cpu_s_) << ", \"server_rss_kib\": " << bench_load::JsonList(rss_kib_)
    << ", \"server_hwm_kib\": " << end_usage_.hwm_kib
    << ", \"quorum_ids\": " << bench_load::JsonList(std::vector<int>(latency_s_.size(), 1))
    << ", \"load_cpu_s\": " << self.cpu_s << ", \"load_hwm_kib\": " << self.hwm_kib
    << ", \"request_bytes\": " << o_.request_bytes << ", \"reply_bytes\": " << o_.reply_bytes;
  std::string err = error_;
  for (char& c : err) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '\'';
  }
  j << ", \"error\": \"" << err << "\"}";
  std::printf("%s\n", j.str().c_str());
  if (!ok) std::fprintf(stderr, "ft_floor_load: %s\n", error_.c_str());
}

}  // namespace ft_floor_load
