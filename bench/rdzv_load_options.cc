// rdzv_load's command line: see rdzv_load_options.h.
#include "rdzv_load_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rdzv_load {

[[noreturn]] void Usage(const std::string& what) {
  std::fprintf(stderr,
               "rdzv_load: %s\nusage: rdzv_load --endpoint HOST:PORT [--agents N] [--channels C] [--drop K] "
               "[--run-id ID] [--keep-alive-s S] [--timeout-s S] [--server-pid PID]\n",
               what.c_str());
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    const std::string value = argv[++i];
    auto number = [&](double lo) {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(v >= lo)) {  // !(>=): nan too
        Usage(flag + " '" + value + "': give a number >= " + std::to_string(static_cast<long>(lo)));
      }
      return v;
    };
    if (flag == "--endpoint") o.endpoint = value;
    else if (flag == "--agents") o.agents = static_cast<int>(number(2));
    else if (flag == "--channels") o.channels = static_cast<int>(number(1));
    else if (flag == "--drop") o.drop = static_cast<int>(number(1));
    else if (flag == "--run-id") o.run_id = value;
    else if (flag == "--keep-alive-s") o.keep_alive_s = number(0.001);
    else if (flag == "--timeout-s") o.timeout_s = number(1);
    else if (flag == "--server-pid") o.server_pid = static_cast<long>(number(1));
    else Usage("unknown flag " + flag);
  }
  if (o.endpoint.empty()) Usage("--endpoint is required");
  if (o.channels == 0 || o.channels > o.agents) o.channels = o.agents;
  if (o.drop < 0) o.drop = std::max(1, o.agents / 100);
  if (o.drop >= o.agents) Usage("--drop " + std::to_string(o.drop) + " must be below --agents");
  return o;
}

}  // namespace rdzv_load
