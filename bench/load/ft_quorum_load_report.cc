// ft_quorum_load's report: one JSON object (see ft_quorum_load.cc).
#include <sys/resource.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "ft_quorum_load_driver.h"

namespace ft_quorum_load {
namespace {

template <class T>
std::string JsonList(const std::vector<T>& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

}  // namespace

void Load::Report(bool ok) {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  const double own_cpu = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                         static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream j;
  j << "{\"ok\": " << (ok ? "true" : "false") << ", \"groups\": " << o_.groups << ", \"channels\": " << o_.channels
    << ", \"steps\": " << latency_s_.size() << ", \"step_s\": " << o_.step_s << ", \"losses\": " << losses_
    << ", \"held_back\": " << held_back_
    << ", \"lost_events\": " << events_ << ", \"min_world\": " << (max_world_ ? min_world_ : 0)
    << ", \"max_world\": " << max_world_ << ", \"latency_s\": " << JsonList(latency_s_)
    << ", \"server_cpu_s\": " << JsonList(cpu_s_) << ", \"server_rss_kib\": " << JsonList(rss_kib_)
    << ", \"server_hwm_kib\": " << end_usage_.hwm_kib << ", \"quorum_ids\": " << JsonList(quorum_ids_)
    << ", \"load_cpu_s\": " << own_cpu << ", \"load_hwm_kib\": " << self.ru_maxrss;
  std::string err = error_;
  for (char& c : err) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '\'';
  }
  j << ", \"error\": \"" << err << "\"}";
  std::printf("%s\n", j.str().c_str());
  if (!ok) std::fprintf(stderr, "ft_quorum_load: %s\n", error_.c_str());
}

}  // namespace ft_quorum_load
