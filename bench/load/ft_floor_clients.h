// ft_floor_load's clients: FloorClients, the N groups' connections, one
// thread, epoll, stepped together (see ft_floor_load.cc for what they
// measure). Owns its sockets; the server is the forked child's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ft_floor_load.h"
#include "server_usage.h"

namespace ft_floor_load {

class FloorClients {
 public:
  FloorClients(const Options& o, int port, pid_t server) : o_(o), port_(port), server_(server) {}
  ~FloorClients() { CloseAll(); }
  // Connects, runs step 0 and the measured steps, ends the server and
  // prints the report; the exit code (0 ok, 1 not).
  int Run();

 private:
  using Clock = std::chrono::steady_clock;
  struct Client {
    int fd = -1;
    std::string in;
    int64_t answered = -1;  // the last step answered
  };

  bool Connect();
  // One step: every client's frame sent, then every answer read; false on
  // failure (error_).
  bool Step(int64_t step);
  bool Read(Client& c, int64_t step, int* pending, Clock::time_point* last);
  void CloseAll();
  // Waits (at most --timeout-s) for the server to exit once the clients
  // closed, then kills it; false when it failed.
  bool EndServer();
  void Fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }
  void Report(bool ok) const;

  const Options& o_;
  int port_;
  pid_t server_;
  int ep_ = -1;
  std::vector<Client> clients_;
  std::string frame_;
  std::string error_;
  std::vector<double> latency_s_, cpu_s_;
  std::vector<long> rss_kib_;
  bench_load::ServerUsage end_usage_;
};

}  // namespace ft_floor_load
