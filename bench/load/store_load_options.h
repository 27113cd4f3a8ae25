// store_load's command line (see store_load.cc for the modes and flags):
// the parsed Options, and Usage, which prints the reason and the usage on
// stderr and exits 2. Parse exits through Usage on any bad argument.
// Plain values; no threads.
#pragma once

#include <cstddef>
#include <string>

namespace store_load {

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string mode;
  int conns = 1;
  size_t value_bytes = 64;
  double seconds = 0;
  double warmup = 0.2;
  long cycles = 0;
  int clients = 0;
  int server_pid = 0;
  double timeout = 300;
  std::string prefix = "load";
  // Clients per source address: client i binds 127.1.0.0 + 1 + i / K before
  // it connects, as K ranks of one node would (the store caps connections per
  // address); 0: the kernel picks the source (127.0.0.1 for every client).
  int clients_per_address = 8;
};

[[noreturn]] void Usage(const std::string& why);

Options Parse(int argc, char** argv);

}  // namespace store_load
