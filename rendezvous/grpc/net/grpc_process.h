// Process-wide settings of the gRPC runtime, made once by a process before it
// creates its first channel or server: ctrun's multi-node path
// (launcher/rdzv/setup.cc), `ctrun status` and ctrund
// (daemon_main.cc).
#pragma once

namespace ctrun::rdzv {

// Turns off absl's Mutex deadlock detection, which Debian's absl build leaves
// on: it keeps a graph of every lock gRPC takes (GraphCycles::InsertEdge on
// each acquisition). That was ~3 % of all CPU with 1024 agents on one host
// (bench/rendezvous.sh, perf) and checks none of our code.
//
// And calls KeepCallbackQueueAlive. Idempotent.
void ConfigureGrpcProcess();

// Keeps gRPC's shared callback completion queue alive until the process
// exits. gRPC 1.51 tears that queue down when the last channel or server that
// uses it goes, and a poller thread can then free it a second time (ASan:
// double-free in grpc_cq_internal_unref from cq_next; `ctrun status` hit it
// in ~5 % of runs on a loaded host, after printing its table). With one
// reference held for good, the teardown never runs. RendezvousServer::Start
// and RendezvousClient's constructor call it, so every user of the callback
// API is covered. It starts gRPC's threads: block the signals a process waits
// for with sigwait first. Idempotent and thread-safe.
void KeepCallbackQueueAlive();

// Sends gRPC's own log lines (e.g. its "No address added" error when a
// port is taken, which RendezvousServer::Start already reports as a Status)
// to spdlog at debug level, so they show only with debug logging.
// Process-wide; call once from main before any server or channel exists.
// With `warn_handshake_failures` (ctrund), gRPC's debug messages are let
// through too and a failed TLS handshake with a client becomes a warning
// naming the peer (at most one a second); agents keep them at debug (their
// own error line says it).
void RouteGrpcLogsToSpdlog(bool warn_handshake_failures = false);

}  // namespace ctrun::rdzv
