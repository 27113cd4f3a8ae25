// store_load's storm mode: see store_load_modes.h and store_load.cc.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "store_load_loop.h"
#include "store_load_modes.h"

namespace store_load {

using ctrun::rdzv::StoreOp;

int Storm(const Options& o) {
  const rlim_t limit = RaiseFdLimit(static_cast<size_t>(o.clients) + 16);
  Loop loop(o);
  std::vector<Conn> clients(static_cast<size_t>(o.clients));
  const std::string barrier = "/" + o.prefix + "/barrier", release = "/" + o.prefix + "/release";
  StoreRequest add{StoreOp::kAdd, {barrier}, {}, 1};
  StoreRequest set{StoreOp::kSet, {release}, {"1"}, 0};
  StoreRequest wait{StoreOp::kWait, {release}, {}, 0};
  std::vector<bool> seen(static_cast<size_t>(o.clients) + 1);
  int released = 0;
  double slowest_connect = 0;
  Clock::time_point last{};

  const Cpu cpu0 = ServerCpu(o.server_pid);
  const Clock::time_point t0 = Clock::now();
  for (Conn& c : clients) {
    if (!loop.Connect(c)) break;
  }
  const bool ran = loop.Run(
      [&](Conn& c) {
        slowest_connect = std::max(slowest_connect, Since(c.connect_start, Clock::now()));
        loop.Queue(c, add);
      },
      [&](Conn& c, const StoreRequest& req, const StoreReply& r) {
        if (req.op == StoreOp::kAdd) {
          if (r.number < 1 || r.number > o.clients || seen[static_cast<size_t>(r.number)]) {
            loop.Problem("the barrier's ADD returned " + std::to_string(r.number) + " (out of 1.." +
                         std::to_string(o.clients) + " or twice)");
            loop.Close(c);
            return;
          }
          seen[static_cast<size_t>(r.number)] = true;
          if (r.number == o.clients) loop.Queue(c, set);
          loop.Queue(c, wait);
        } else if (req.op == StoreOp::kWait) {
          if (r.number != 0) loop.Problem("WAIT on the release key replied " + std::to_string(r.number) + ", not 0");
          ++released;
          last = Clock::now();
          loop.Close(c);
        }
      },
      [&]() { return released == o.clients || loop.errors() > 0; });
  const Cpu cpu = ServerCpu(o.server_pid) - cpu0;
  for (Conn& c : clients) loop.Close(c);
  std::printf("%s\n", Json({{"clients", o.clients},
                            {"released", released},
                            {"seconds", released == o.clients ? Since(t0, last) : 0},
                            {"slowest_connect_s", slowest_connect},
                            {"connect_failures", loop.connect_failures()},
                            {"retries", loop.retries()},
                            {"server_cpu_s", cpu.total},
                            {"server_sys_s", cpu.sys},
                            {"fd_limit", static_cast<double>(limit)},
                            {"errors", loop.errors()}})
                          .c_str());
  return loop.errors() == 0 && ran && released == o.clients ? 0 : 1;
}

}  // namespace store_load
