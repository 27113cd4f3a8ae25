// Process-wide settings of the gRPC runtime, made once by a process before it
// creates its first channel or server: ctrun's multi-node path
// (launcher/grpc_rendezvous_setup.cc) and ctrund (daemon_main.cc).
#pragma once

namespace ctrun::rdzv {

// Turns off absl's Mutex deadlock detection, which Debian's absl build leaves
// on: it keeps a graph of every lock gRPC takes (GraphCycles::InsertEdge on
// each acquisition). That was ~3 % of all CPU with 1024 agents on one host
// (bench/rendezvous.sh, perf) and checks none of our code. Idempotent.
void ConfigureGrpcProcess();

}  // namespace ctrun::rdzv
