// logs_load's command line (see logs_load.cc): the parsed Options with
// their defaults (the size: 1,024 nodes x 8 ranks x 100 lines/s for
// 60 s). Parse exits 2 through FlagReader's usage on a bad argument, saying
// why and the usage on stderr. Plain values; no threads.
#pragma once

#include <string>

namespace logs_load {

struct Options {
  std::string endpoint;
  int nodes = 1024;
  int ranks = 8;            // per node
  double rate = 100;        // lines per second per rank
  double duration_s = 60;   // of shipping
  double interval_ms = 50;  // between a node's batches (the agent's kShipInterval)
  int threads = 4;          // sender threads; each drives nodes/threads streams
  int channels = 0;         // gRPC channels (connections); 0: one per node, as real nodes have
  std::string run_id = "logs-load";
  double start_delay_s = 0; // after the run is joined ("ready" printed) and before the first batch
  double timeout_s = 30;    // for the join, and for each stream's end
};

// Lines each rank writes in all: rate x duration, rounded down.
long LinesPerRank(const Options& o);

Options Parse(int argc, char** argv);

}  // namespace logs_load
