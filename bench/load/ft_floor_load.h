// ft_floor_load's parts (see ft_floor_load.cc): the options, the server
// (a child process) and the clients (the parent); the frames both speak
// are ft_floor_frames.h's.
#pragma once

#include <sys/types.h>

#include "ft_floor_frames.h"

namespace ft_floor_load {

struct Options {
  int groups = 256;
  int steps = 30;             // measured steps, after step 0
  double step_s = 1.0;        // a step starts at most this often
  int request_bytes = 89;     // a compact FtSyncRequest's serialized size as ft_quorum_load sends it
  int reply_bytes = 47;       // the compact FtSyncReply's
  int per_address = 1024;     // client connections per loopback source address
  double timeout_s = 120;     // the most one step (or connecting) may take
};

Options Parse(int argc, char** argv);

// The server: accepts o.groups connections on `listen_fd`, answers every
// connection once all of them sent the step's frame, one thread, epoll.
// Returns when every connection closed (0), on a protocol error or its
// deadline (1, the reason on stderr). Run in the forked child.
int Serve(int listen_fd, const Options& o);

// The clients: o.groups connections to 127.0.0.1:port, stepped together;
// prints the JSON report. `server` is the server's pid (its CPU and RSS
// from /proc). Returns the exit code (0 ok, 1 not).
int Drive(const Options& o, int port, pid_t server);

}  // namespace ft_floor_load
