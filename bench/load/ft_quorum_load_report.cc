// ft_quorum_load's report: one JSON object (see ft_quorum_load.cc).
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "ft_quorum_load_driver.h"
#include "server_usage.h"

namespace ft_quorum_load {

void Load::Report(bool ok) {
  const bench_load::OwnUsage self = bench_load::ReadOwnUsage();
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream j;
  j << "{\"ok\": " << (ok ? "true" : "false") << ", \"groups\": " << o_.groups << ", \"channels\": " << o_.channels
    << ", \"steps\": " << latency_s_.size() << ", \"step_s\": " << o_.step_s << ", \"losses\": " << losses_
    << ", \"held_back\": " << held_back_
    << ", \"lost_events\": " << events_ << ", \"min_world\": " << (max_world_ ? min_world_ : 0)
    << ", \"max_world\": " << max_world_ << ", \"latency_s\": " << bench_load::JsonList(latency_s_)
    << ", \"server_cpu_s\": " << bench_load::JsonList(cpu_s_) << ", \"server_rss_kib\": " << bench_load::JsonList(rss_kib_)
    << ", \"server_hwm_kib\": " << end_usage_.hwm_kib << ", \"quorum_ids\": " << bench_load::JsonList(quorum_ids_)
    << ", \"load_cpu_s\": " << self.cpu_s << ", \"load_hwm_kib\": " << self.hwm_kib;
  std::string err = error_;
  for (char& c : err) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '\'';
  }
  j << ", \"error\": \"" << err << "\"}";
  std::printf("%s\n", j.str().c_str());
  if (!ok) std::fprintf(stderr, "ft_quorum_load: %s\n", error_.c_str());
}

}  // namespace ft_quorum_load
