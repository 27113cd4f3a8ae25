// rdzv_load's command line (see rdzv_load.cc): the parsed Options, with
// the defaults filled in (channels, drop). Parse exits 2 through Usage on a
// bad argument, saying why and the usage on stderr. Plain values; no threads.
#pragma once

#include <string>

namespace rdzv_load {

struct Options {
  std::string endpoint;
  int agents = 16;
  int channels = 0;  // 0: one per agent
  int drop = -1;     // -1: 1 % of the agents, at least 1
  std::string run_id = "rdzv-load";
  double keep_alive_s = 5;
  double timeout_s = 300;
  long server_pid = 0;
};

[[noreturn]] void Usage(const std::string& what);

Options Parse(int argc, char** argv);

}  // namespace rdzv_load
