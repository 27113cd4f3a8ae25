// Ranks forked from a process that has already started, for the test suite.
// A libtorch binary spends ~0.8 s of CPU (2.3 s under ASan) in the dynamic
// loader and libtorch's static initialisers before main, and the trainer's
// tests start hundreds of ranks; a fork of a started process skips that.
//
// ServeForksIfAsked, called first in main: when CTRUN_FORK_SERVER_FD is set
// (to an AF_UNIX SOCK_SEQPACKET socket's descriptor), the process becomes a
// fork server and never returns from the call itself; each request it serves
// forks a child, and the child returns from the call with argv, its
// environment and its standard streams replaced by the request's, then runs
// main as an exec'd rank would. When the peer closes the socket the server
// kills any child still running and exits 0. Without the variable the call
// returns at once and changes nothing.
//
// What a forked rank shares with the server rather than with its request:
// whatever the loader and the static initialisers read before main (LD_*,
// OMP_*, the sanitizers' options); the client (tests/trainer/fork_server.py)
// starts a rank whose values of those differ with exec instead.
//
// A forked rank ends at exit without the static destructors: they free
// libtorch's registries, whose pages a fork shares with the server, and the
// copies the kernel makes as they are written took 0.3 s a rank (0.06 s
// after exec). stdio is flushed first. Under LeakSanitizer the leak check
// runs only where the request asks for it: it scans (and so copies) the
// whole heap, libtorch's included, ~1 s a rank, and the client asks it of
// the ranks whose code paths a launch's other ranks repeat only once.
//
// Protocol, one message each way per event:
//   request   "leak-check=<0|1>\0<argc>\0<arg>\0...\0<envc>\0<NAME=value>\0...\0"
//             with exactly three descriptors attached (SCM_RIGHTS): stdin,
//             stdout, stderr;
//   reply     "pid <pid>", or "error <text>" for a malformed request;
//   later     "exit <pid> <wait status>" when that child has ended.
// Children die with the server (PR_SET_PDEATHSIG). Thread model: call from
// main before any thread starts.
#pragma once

namespace ctrun::trainer {

void ServeForksIfAsked(int& argc, char**& argv);

}  // namespace ctrun::trainer
