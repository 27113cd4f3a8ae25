// store_load's command line: see store_load_options.h.
#include "store_load_options.h"

#include <optional>

#include "flag_reader.h"

namespace store_load {

[[noreturn]] void Usage(const std::string& why) {
  bench_load::PrintUsageAndExit("store_load", why,
                                "usage: store_load --port P [--host H] [--server-pid PID] [--prefix S] [--timeout S]\n"
                                "                  [--clients-per-address K]\n"
                                "         mix --conns C --value-bytes V (--seconds T [--warmup W] | --cycles K)\n"
                                "       | storm --clients N\n");
}

namespace {

double Number(const std::string& flag, const std::string& text) {
  std::optional<double> v = bench_load::ParseNumber(text, 0);
  if (!v) Usage(flag + " wants a number >= 0, got '" + text + "'");
  return *v;
}

void Check(const Options& o) {
  if (o.port <= 0 || o.port > 65535) Usage("--port wants the server's port (1-65535)");
  if (o.mode == "mix") {
    if (o.conns < 1) Usage("--conns wants at least 1");
    if (o.value_bytes < 16) Usage("--value-bytes wants at least 16");
    if ((o.seconds > 0) == (o.cycles > 0)) Usage("mix wants one of --seconds and --cycles");
  } else if (o.mode == "storm") {
    if (o.clients < 1) Usage("storm wants --clients N (N >= 1)");
  } else {
    Usage("name a mode: mix or storm");
  }
}

}  // namespace

Options Parse(int argc, char** argv) {
  Options o;
  bench_load::FlagReader args(argc, argv, Usage);
  while (args.Next()) {
    const std::string& a = args.flag();
    if (a == "mix" || a == "storm") {
      o.mode = a;
      continue;
    }
    if (!args.HasValue()) Usage(a == "--help" ? "help" : a + " wants a value (or is unknown)");
    const std::string& v = args.Value();
    if (a == "--host") o.host = v;
    else if (a == "--port") o.port = static_cast<int>(Number(a, v));
    else if (a == "--conns") o.conns = static_cast<int>(Number(a, v));
    else if (a == "--value-bytes") o.value_bytes = static_cast<size_t>(Number(a, v));
    else if (a == "--seconds") o.seconds = Number(a, v);
    else if (a == "--warmup") o.warmup = Number(a, v);
    else if (a == "--cycles") o.cycles = static_cast<long>(Number(a, v));
    else if (a == "--clients") o.clients = static_cast<int>(Number(a, v));
    else if (a == "--server-pid") o.server_pid = static_cast<int>(Number(a, v));
    else if (a == "--timeout") o.timeout = Number(a, v);
    else if (a == "--prefix") o.prefix = v;
    else if (a == "--clients-per-address") o.clients_per_address = static_cast<int>(Number(a, v));
    else Usage("unknown argument '" + a + "'");
  }
  Check(o);
  return o;
}

}  // namespace store_load
