// store_load: a load generator that speaks torch 1.13's TCPStore wire
// protocol (encoded and decoded by rendezvous/store/store_protocol.h, the
// same code ctrun's server parses with) to any server at HOST:PORT: ctrun's
// store or torch's own TCPStore. One thread, one epoll loop, non-blocking
// sockets. Every reply is checked against what the protocol says it must be;
// any mismatch is an error.
//
//   store_load --port P [--host H] mix --conns C --value-bytes V
//              (--seconds T [--warmup W] | --cycles K) [--server-pid PID]
//     C connections, each a closed loop (one request in flight, as a rank's
//     client is) over the cycle
//        SET k v + GET k (pipelined: SET has no reply) -> v
//        ADD total 1                 -> a count no other ADD got
//        WAIT [k]                    -> 0 (stop waiting: k exists)
//        COMPARE_SET k v w           -> w
//     with V-byte values (5 requests, 4 round trips). Timed mode measures T
//     seconds after W of warm-up; --cycles runs K cycles per connection and
//     measures all of them. Then one GET of `total` must equal the number of
//     ADDs made.
//   store_load --port P [--host H] storm --clients N [--server-pid PID]
//     N clients connect at once (non-blocking connects, all issued before
//     any reply is read); each ADDs 1 to a barrier key, the one that reads N
//     SETs a release key, each WAITs on the release key, then closes. Timed
//     from the first connect() to the last client released. Every ADD result
//     1..N must come back exactly once.
//
// Each client connects from a source address of its own node's: K clients
// (--clients-per-address, default 8) per address from 127.1.0.1 up, as the
// ranks of one node would, so the server's cap on connections from one
// address (rendezvous/store/store_server.h) is met as in a real job; 0
// leaves the source to the kernel (127.0.0.1 for every client). The host
// must then be a 127.x.y.z address.
//
// Prints one JSON object on stdout: requests, seconds, requests_per_s,
// p50_us, p99_us (of requests with a reply, from sending to the whole reply
// read; a GET's includes its pipelined SET), server_cpu_s (utime + stime of
// --server-pid over the measured window, from /proc/PID/stat) and
// server_sys_s (its stime: the kernel's part), errors, and
// for storm the connect failures, the slowest connect, and the fd limit.
// Raises its RLIMIT_NOFILE soft limit as far as the connections need (never
// above the hard limit; says so on stderr).
//
// Exit codes: 0 every reply was right; 1 a reply was wrong, a connection
// failed or closed, or --timeout ran out (the first few problems are on
// stderr); 2 bad arguments.
//
// The parts: store_load_options (the command line), store_load_loop (the
// connections and the epoll loop), store_load_mix / store_load_storm (the
// modes), store_load_report (what is measured and printed).
#include "store_load_modes.h"
#include "store_load_options.h"

int main(int argc, char** argv) {
  const store_load::Options o = store_load::Parse(argc, argv);
  return o.mode == "mix" ? store_load::Mix(o) : store_load::Storm(o);
}
