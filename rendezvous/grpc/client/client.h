// RendezvousClient: one node's connection to a rendezvous server (in the
// hosting agent or the ctrund daemon).
//
// It speaks proto/rendezvous.proto and hands the caller the machine's own
// vocabulary (events.h): proto types stop here. Calls are asynchronous; every
// result is delivered through the `post` function given at construction (the
// agent passes one that posts onto its Asio loop), never on a gRPC thread.
//
// Connecting: calls wait for the server to become reachable (gRPC
// wait-for-ready) — a server that starts later is fine; the caller bounds the
// wait with its own join timeout.
//
// Thread model: construct, call and destroy on the caller's thread. The
// destructor cancels open calls; callbacks already posted may still run, so
// the poster must drop them once the owner is gone (the agent's io_context
// outlives the client).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "rendezvous/grpc/convert/reconnect.h"
#include "rendezvous/grpc/net/credentials.h"
#include "rendezvous/machine/events.h"
#include "rendezvous/machine/failure_record.h"
#include "rendezvous/machine/machine.h"
#include "rendezvous/machine/rdzv_params.h"
#include "rendezvous/machine/run_view.h"
#include "rendezvous/machine/straggler.h"

namespace ctrun::rdzv {

struct ClientOptions {
  std::string endpoint;   // "host:port" or "[v6]:port"
  std::string run_id;
  NodeId node;
  uint64_t incarnation = 0;
  Params params;          // sent with every Join
  std::string token;      // "" = none
  TlsConfig tls;          // TLS when tls.ClientSide() (from LoadTls); plaintext otherwise
};

// What a Join stream delivers: a decision addressed to this node.
using Update = Decision;

struct JoinArgs {
  std::optional<int> hint_rank;
  int local_world_size = 1;
  std::string addr;       // "" = let the server use the address it sees
  int master_port = 0;    // free port on this node for MASTER_PORT
  // kNo: a new rendezvous attempt. Otherwise this Join re-opens a stream
  // that broke (e.g. the daemon restarted): see reconnect.h.
  Reconnect reconnect = Reconnect::kNo;
};

class RendezvousClient {
 public:
  using Post = std::function<void(std::function<void()>)>;

  RendezvousClient(ClientOptions options, Post post);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  // Opens a Join stream; the previous one's callbacks stop (the server ends
  // it when this Join reaches it).
  // `on_update` runs for every update; `on_end` once when the stream ends:
  // OK when the server finished it, Unavailable when the server went away,
  // FailedPrecondition for a token or version mismatch. A TLS handshake
  // that keeps failing does not end it (the call waits for the server):
  // GetState reports that.
  void Join(const JoinArgs& args, std::function<void(const Update&)> on_update,
            std::function<void(const Status&)> on_end);

  // Cancels the open Join streams. The server takes a cancelled stream as
  // this node being gone (as if it left on a signal): call it after Leave.
  void CancelJoin();

  // `done` gets OK, or the rejection as a Status (ToStatus), or Unavailable.
  void KeepAlive(std::function<void(const Status&)> done);
  // The same, carrying this node's step report (straggler.h; nullopt: none);
  // `done` also gets the straggler changes the server queued for this node
  // (empty unless the status is OK).
  using KeepAliveDone = std::function<void(const Status&, const std::vector<StragglerChange>&)>;
  void KeepAlive(const std::optional<StepReport>& steps, KeepAliveDone done);

  // `done` gets OK or Unavailable; bounded by `timeout`. `report`: with
  // kUnhealthy, the failed check and its last output lines; `verdict`: with
  // kFailedExit, the verdict this node printed (the others print it too).
  void Leave(LeaveReason reason, Duration timeout, std::function<void(const Status&)> done,
             const std::string& report = "", const std::optional<VerdictSummary>& verdict = std::nullopt);

  // The run's state in numbers (machine.h's Counts; last_call_deadline on
  // this host's clock); bounded by `timeout`. Unlike the other calls it does
  // not wait for the server to become reachable: it fails at once with
  // Unavailable (and gRPC's reason) when the last connection attempt
  // failed, or with FailedPrecondition "TLS handshake ... failed" when the
  // server was reached but the TLS handshake failed (wrong CA, wrong name,
  // plaintext against TLS): a configuration error that retrying cannot fix.
  void GetState(Duration timeout, std::function<void(const Result<Counts>&)> done);

  // The run with every node (run_view.h), for `ctrun status`; fails like
  // GetState, and with NotFound when the server does not know the run.
  // With an empty options.run_id: the server's only run (RunView::run_id
  // says which), NotFound naming the runs when it serves none or several.
  void GetStatus(Duration timeout, std::function<void(const Result<RunView>&)> done);

  // This node's preemption notice to the other nodes of the run (the server
  // pushes the run's first one to them at once; proto/rendezvous.proto's
  // Preempt). `done` gets what the server answered, or the call's error
  // (as the other calls map it: a source or remaining_s out of bounds comes
  // back as Unavailable with the server's line); bounded by `timeout`.
  // Waits for a server that is not reachable yet, up to `timeout`.
  struct PreemptSent {
    bool first = false;  // the run's first notice: it was pushed
    int pushed = 0;      // the other nodes the run held (0 unless first)
  };
  void Preempt(double remaining_s, const std::string& source, Duration timeout,
               std::function<void(const Result<PreemptSent>&)> done);

  // This node's failed workers of `round` (failure_record.h; proto's
  // ReportFailure), for `ctrun status --why`; `host` is this node's host
  // name. `done` gets OK or the call's error (a report out of bounds comes
  // back with the server's line); bounded by `timeout`. Waits for a server
  // that is not reachable yet, up to `timeout`.
  void ReportFailure(uint64_t round, const std::string& host, const std::vector<WorkerFailureInfo>& failures,
                     Duration timeout, std::function<void(const Status&)> done);

  const ClientOptions& options() const { return options_; }

 private:
  class Impl;
  ClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctrun::rdzv
