// rdzv_load's command line: see rdzv_load_options.h.
#include "rdzv_load_options.h"

#include <algorithm>

#include "flag_reader.h"

namespace rdzv_load {

[[noreturn]] void Usage(const std::string& what) {
  bench_load::PrintUsageAndExit(
      "rdzv_load", what,
      "usage: rdzv_load --endpoint HOST:PORT [--agents N] [--channels C] [--drop K] "
      "[--run-id ID] [--keep-alive-s S] [--timeout-s S] [--server-pid PID]\n");
}

Options Parse(int argc, char** argv) {
  Options o;
  bench_load::FlagReader args(argc, argv, Usage);
  while (args.Next()) {
    const std::string& flag = args.flag();
    const std::string& value = args.Value();
    if (flag == "--endpoint") o.endpoint = value;
    else if (flag == "--agents") o.agents = static_cast<int>(args.Number(2));
    else if (flag == "--channels") o.channels = static_cast<int>(args.Number(1));
    else if (flag == "--drop") o.drop = static_cast<int>(args.Number(1));
    else if (flag == "--run-id") o.run_id = value;
    else if (flag == "--keep-alive-s") o.keep_alive_s = args.Number(0.001);
    else if (flag == "--timeout-s") o.timeout_s = args.Number(1);
    else if (flag == "--server-pid") o.server_pid = static_cast<long>(args.Number(1));
    else Usage("unknown flag " + flag);
  }
  if (o.endpoint.empty()) Usage("--endpoint is required");
  if (o.channels == 0 || o.channels > o.agents) o.channels = o.agents;
  if (o.drop < 0) o.drop = std::max(1, o.agents / 100);
  if (o.drop >= o.agents) Usage("--drop " + std::to_string(o.drop) + " must be below --agents");
  return o;
}

}  // namespace rdzv_load
