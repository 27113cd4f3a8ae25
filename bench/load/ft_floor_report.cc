// ft_floor_load's report: one JSON object in ft_quorum_load's shape (see
// ft_floor_load.cc).
#include <sys/resource.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "ft_floor_clients.h"

namespace ft_floor_load {
namespace {

template <class T>
std::string FloorJsonList(const std::vector<T>& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

}  // namespace

void FloorClients::Report(bool ok) const {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  const double own_cpu = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                         static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  const int world = ok ? o_.groups : 0;
  std::ostringstream j;
  j << "{\"ok\": " << (ok ? "true" : "false") << ", \"groups\": " << o_.groups << ", \"channels\": " << o_.groups
    << ", \"steps\": " << latency_s_.size() << ", \"step_s\": " << o_.step_s
    << ", \"losses\": 0, \"held_back\": 0, \"lost_events\": 0, \"min_world\": " << world
    << ", \"max_world\": " << world << ", \"latency_s\": " << FloorJsonList(latency_s_)
    << ", \"server_cpu_s\": " << FloorJsonList(cpu_s_) << ", \"server_rss_kib\": " << FloorJsonList(rss_kib_)
    << ", \"server_hwm_kib\": " << end_usage_.hwm_kib
    << ", \"quorum_ids\": " << FloorJsonList(std::vector<int>(latency_s_.size(), 1))
    << ", \"load_cpu_s\": " << own_cpu << ", \"load_hwm_kib\": " << self.ru_maxrss
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
