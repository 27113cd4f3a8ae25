// RendezvousServer: the gRPC service of proto/rendezvous.proto around the
// rendezvous machines of one RunRegistry.
//
// Each request becomes an Event for its run's RendezvousMachine; each
// Decision becomes a reply or a push on the addressee's Join stream. The
// server decides nothing itself. One mutex guards the registry and the table
// of open Join streams and is held across Step, the write of the run's state
// (with state_dir) and the enqueue of the resulting updates; gRPC calls
// (writes, finishes) are made with no lock held, so no reactor ever waits on
// the network or on another reactor.
//
// With state_dir, the write (two fsyncs) is made under that lock on purpose,
// and a handler waits for it: the lock is what orders every reply and push
// after the state it reflects is on disk. Outside the lock, a GetState,
// KeepAlive or reconnect answered by another thread could report a state
// not yet written, and two writes of one run could land out of step order
// (an older state over a newer one). Only steps that change a run are
// written (joins, leaves, decisions; not a keep-alive that changes nothing),
// so the wait is rare; without state_dir nothing is written.
//
// Join streams: a node's newer Join stream replaces its older one (the old
// one is finished OK). A decision for a node with no open stream is dropped
// (the node learns the state on its next Join). A node's current stream that
// the client drops (agent killed, connection broken) is reported to the
// machine as Leave{kSignal}: the others restart at once; a node that is in
// fact alive learns of it from its next keep-alive and joins again.
// Rejected, TimedOut, Evicted and Closed end the addressee's stream (OK)
// after the update is written. A Preempt (a node's preemption notice) is
// pushed as PreemptNotice on the other nodes' streams at once, the run's
// first one only (preempt_call.cc).
//
// Deadlines: one timer thread sleeps until the earliest NextDeadline() of all
// runs (or the earliest time a closed run is to be forgotten, with
// closed_run_ttl) and then steps Tick{} on the runs that are due. Runs due to
// be forgotten are also forgotten at the start of every request, so that
// with a zero TTL a Join right after a run's last Leave starts a new run.
//
// The listen port is shared with the workers' c10d stores (ServerOptions::
// serve_stores, port_mux.h): the server accepts every connection itself and
// hands gRPC's to gRPC.
//
// Thread model: Start, port, address, Shutdown and the destructor may be
// called from any thread, but not concurrently with the destructor.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/status.h"
#include "rendezvous/grpc/net/credentials.h"
#include "rendezvous/machine/rdzv_params.h"
#include "rendezvous/machine/run_registry.h"

namespace ctrun::rdzv {

struct FixedRun {
  std::string run_id;
  Params params;
};

struct ServerOptions {
  // "host:port" or "[v6]:port"; port 0 picks a free port (see port()).
  std::string listen_address = "127.0.0.1:0";
  // kFixed serves exactly `runs`; kAutoCreate (the daemon) creates a run at
  // its first Join with the Params that Join carries (`runs` pre-added).
  RunRegistry::Mode mode = RunRegistry::Mode::kFixed;
  std::vector<FixedRun> runs;
  // When non-empty, every request must carry this token, else the call
  // fails with PERMISSION_DENIED (and the server logs the refusal, rate
  // limited, with the caller's address).
  std::string token;
  // TLS when tls.ServerSide() (from LoadTls); mutual TLS when tls.ca_pem is
  // also set. A client that fails the handshake never reaches a handler.
  TlsConfig tls;
  // When non-empty (ctrund --state-dir), every run's state is written there
  // after each step that changed it, before any reply goes out, and the runs
  // found there at Start are resumed (state_store.h; docs/daemon.md).
  std::string state_dir;
  // Serve the workers' c10d stores on the listen port too (port_mux.h): a
  // store connection goes to the store of the run whose running round has a
  // member at the connection's source address (store_routing.h), and each
  // round starts with an empty store. A round that cannot be told apart
  // from another running round by its members' addresses is not offered
  // the port: RoundComplete says so, and its agents host the store on a
  // port of their own. False (ctrund --no-worker-stores): no round is
  // offered the port, store connections are closed.
  bool serve_stores = true;
  // How long a new connection to the listen port may take to say what it
  // speaks before it is closed (port_mux.h; nullopt: the mux's 10 s). The
  // launcher and ctrund set it from CTRUN_PORT_SNIFF_DEADLINE_MS, a knob
  // for tests.
  std::optional<std::chrono::milliseconds> port_sniff_deadline;
  // ctrund --closed-run-ttl: a run that is closed and holds no live node is
  // forgotten this long after (zero: at the next request or timer turn):
  // its machine, streams, straggler detector, metrics series, history and
  // --state-dir file. A later request for its id finds no run (UNKNOWN_RUN;
  // in kAutoCreate mode a Join starts a new run with that id). nullopt
  // keeps every run for the server's life (an agent's own server).
  std::optional<Duration> closed_run_ttl;
  // The most replica groups one fault-tolerance run takes (FtRuns::Limits::
  // max_groups, ft_runs.h; the default there when unset). A knob for tests.
  std::optional<size_t> ft_max_groups;
};

class RendezvousServer {
 public:
  // Listens on options.listen_address and serves until Shutdown().
  // Errors: InvalidArgument for a malformed listen address or invalid
  // params of a run in options.runs, or a file in options.state_dir that
  // is not a valid run state; IOError when state_dir cannot be created or
  // read; Unavailable "cannot listen on
  // HOST:PORT: address in use" (or the OS reason) when the address cannot
  // be bound; the caller may then act as a client of whoever holds it.
  static Result<std::unique_ptr<RendezvousServer>> Start(const ServerOptions& options);

  // Shuts down (see Shutdown).
  ~RendezvousServer();

  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // The TCP port actually bound (the chosen one when the address said 0).
  int port() const;

  // The listen address with the bound port, e.g. "127.0.0.1:40123".
  const std::string& address() const;

  // Finishes every open Join stream (OK), refuses new calls with
  // UNAVAILABLE, stops the timer and waits (at most about a second) for
  // calls in flight. Idempotent.
  void Shutdown();

  // What the server has seen, in Prometheus' text format (metrics.h): the
  // counters since Start and every run's gauges now. ctrund --metrics-port
  // serves it.
  std::string MetricsText();

  // Every run it holds as the JSON of GET /api/runs (runs_json.h;
  // docs/metrics.md): nodes, recent rounds and restarts, times relative to
  // now. ctrund --metrics-port serves it and the status page polls it.
  std::string RunsJson();

  // Runs `cb` once `run_id` holds no live node (every node left, was evicted
  // or timed out; after close, every running member left or fell silent):
  // at once, on this thread, when that is already so; else on a gRPC or
  // timer thread, with no lock held. An unknown run counts as drained. The
  // hosting agent waits on this before it stops serving (its exit barrier).
  void WhenDrained(const std::string& run_id, std::function<void()> cb);

 private:
  class Impl;
  explicit RendezvousServer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace ctrun::rdzv
