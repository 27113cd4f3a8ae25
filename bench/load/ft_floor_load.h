// ft_floor_load's parts (see ft_floor_load.cc): the options, the frames
// both sides speak, the server (a child process) and the clients (the
// parent).
//
// A frame: a 4-byte little-endian payload length, then the payload; a
// payload starts with the step it belongs to (8 bytes, little-endian),
// then filler up to its size. Payloads are at most kMaxPayload bytes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ft_floor_load {

constexpr size_t kMaxPayload = 4096;
constexpr size_t kStepBytes = 8;

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

// Appends the frame of `step` with a payload of `bytes` (>= kStepBytes).
void AppendFrame(std::string& out, int64_t step, size_t bytes);

// The next whole frame in in[*off..]: its step, and *off moved past it.
// Returns 0 when none is whole yet, 1 for a frame, -1 for a malformed one
// (a length out of kStepBytes..kMaxPayload).
int NextFrame(std::string_view in, size_t* off, int64_t* step);

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
