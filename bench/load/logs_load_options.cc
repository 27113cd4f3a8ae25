#include "logs_load_options.h"

#include <cmath>

#include "flag_reader.h"

namespace logs_load {
namespace {

constexpr char kUsage[] =
    "usage: logs_load --endpoint HOST:PORT [--nodes N] [--ranks R] [--rate LINES_PER_S] [--duration-s S]\n"
    "                 [--interval-ms MS] [--threads T] [--channels C] [--run-id ID] [--start-delay-s S]\n"
    "                 [--timeout-s S]\n";

// A bound on the lines a run may write, so a typo cannot make it unbounded.
constexpr double kMaxLines = 1e9;

}  // namespace

long LinesPerRank(const Options& o) { return static_cast<long>(std::floor(o.rate * o.duration_s)); }

Options Parse(int argc, char** argv) {
  Options o;
  bench_load::FlagReader args(argc, argv, "logs_load", kUsage);
  args.ReadAll([&](const std::string& flag) {
    const std::string& value = args.Value();
    if (flag == "--endpoint") o.endpoint = value;
    else if (flag == "--nodes") o.nodes = static_cast<int>(args.Number(1));
    else if (flag == "--ranks") o.ranks = static_cast<int>(args.Number(1));
    else if (flag == "--rate") o.rate = args.Number(0);
    else if (flag == "--duration-s") o.duration_s = args.Number(0);
    else if (flag == "--interval-ms") o.interval_ms = args.Number(1);
    else if (flag == "--threads") o.threads = static_cast<int>(args.Number(1));
    else if (flag == "--channels") o.channels = static_cast<int>(args.Number(0));
    else if (flag == "--run-id") o.run_id = value;
    else if (flag == "--start-delay-s") o.start_delay_s = args.Number(0);
    else if (flag == "--timeout-s") o.timeout_s = args.Number(1);
    else return false;
    return true;
  });
  if (o.endpoint.empty()) args.Fail("--endpoint is required");
  if (o.nodes > 4096) args.Fail("--nodes " + std::to_string(o.nodes) + ": at most 4096 (the server's stream bound)");
  if (o.ranks > 1024) args.Fail("--ranks " + std::to_string(o.ranks) + ": at most 1024 per node");
  if (o.duration_s > 3600) args.Fail("--duration-s: at most 3600");
  if (static_cast<double>(o.nodes) * o.ranks * o.rate * o.duration_s > kMaxLines) {
    args.Fail("nodes x ranks x rate x duration is over 1e9 lines: make the run smaller");
  }
  if (o.channels == 0 || o.channels > o.nodes) o.channels = o.nodes;
  if (o.threads > o.nodes) o.threads = o.nodes;
  return o;
}

}  // namespace logs_load
