// rdzv_load: N simulated agents against one rendezvous server (ctrund), in
// one process. Each agent speaks proto/rendezvous.proto as the real one does
// (launcher/rdzv/grpc_rendezvous.cc over rendezvous/grpc/client/client.cc): its own
// Join stream, answered by Admitted and later RoundComplete or
// RestartRequested (then it joins again at once), and its own KeepAlive
// every keep_alive_interval, started at its first Admitted.
//
// Agents are spread round-robin over --channels gRPC channels, each with its
// own TCP connection (a local subchannel pool: gRPC would otherwise share one
// connection between channels of equal arguments). The default, one channel
// per agent, is what N real agents on N hosts open.
//
// Phases (times on this process's steady clock):
//   connect  every channel connected
//   storm    N-1 agents join at once; until each has its Admitted
//   round    the last agent joins; until every agent has the round
//            (max_nodes = N: the last Join completes it)
//   drop     --drop agents (every N/drop-th) vanish at once: their Join
//            streams are cancelled (as when an agent is killed: its
//            connection's streams end) and their keep-alives stop; until
//            every survivor has the next round (min_nodes = N - drop)
// then one survivor leaves with NORMAL_EXIT (closing the run) and every
// stream is cancelled.
//
// Prints one JSON object on stdout: the phase times, whether every agent got
// the round with distinct ranks 0..N-1 (and the survivors 0..N-drop-1), and,
// with --server-pid, the server's CPU seconds at each phase's end and its
// VmHWM/VmRSS. Exit 0 when the protocol checks passed, 1 when not (the
// reason on stderr and in "error"), 2 for a bad argument.
//
// The parts: rdzv_load_options (the command line), rdzv_load_driver.h (the
// agents and the Load that drives them), rdzv_load_agent.cc (streams,
// updates, keep-alives), rdzv_load_phases.cc (the phases),
// rdzv_load_report.cc (the server's usage and the report).
#include <sys/resource.h>

#include <cstdio>

#include "rdzv_load_driver.h"
#include "rdzv_load_options.h"

int main(int argc, char** argv) {
  rdzv_load::Options o = rdzv_load::Parse(argc, argv);
  // Each channel is a socket: raise the soft fd limit to the hard one.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && static_cast<rlim_t>(o.channels) + 64 > nofile.rlim_cur) {
    std::fprintf(stderr, "rdzv_load: --channels %d needs more file descriptors than the hard limit %lu: give fewer "
                 "channels or raise the limit (ulimit -Hn)\n", o.channels, static_cast<unsigned long>(nofile.rlim_cur));
    return 2;
  }
  rdzv_load::Load load(o);
  return load.Run();
}
