// FtClient: one replica group's (or one node of a group's) fault-tolerance
// calls to the quorum server
// (the rendezvous server: ctrund, or the agent that hosts --rdzv-endpoint;
// ft_runs.h has the server's side, docs/fault-tolerance.md the design).
//
// It speaks the Ft calls of proto/rendezvous.proto and hands the caller
// step_sync.h's vocabulary: proto types stop here. Calls are asynchronous;
// every result is delivered through the `post` function given at
// construction, never on a gRPC thread. Calls wait for the server to become
// reachable (gRPC wait-for-ready); TLS and the token as RendezvousClient.
//
// Errors (base/status.h has no "cancelled" code: a cancelled call is
// Aborted): Aborted (the call was replaced by a newer one of the group, the
// group left while its call was held, or the client was destroyed),
// Unavailable (server unreachable or shutting down), FailedPrecondition (a
// wrong token, another protocol version, or params other than the run's),
// InvalidArgument (an input out of bounds: group id, node id, address,
// reason, params, part), ResourceExhausted (the server's run or group
// limit, or more watches than the group has nodes). Each
// carries the server's one-line message.
//
// A group of several nodes (options.parts > 1; ft_runs.h): each node has
// its own FtClient with the same group and parts and its own node id; its
// Sync calls carry its part, and the server answers every part once all of
// them asked. Its watch is the node's: it ending is the group lost.
//
// Thread model: construct, call and destroy on the caller's thread. The
// destructor cancels open calls and waits for gRPC's last callback;
// callbacks already posted may still run, so the poster must drop them once
// the owner is gone (the agent's io_context outlives the client).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/result.h"
#include "base/status.h"
#include "rendezvous/grpc/net/credentials.h"
#include "rendezvous/machine/quorum.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::rdzv {

struct FtClientOptions {
  std::string endpoint;   // "host:port"
  std::string run_id;
  std::string group;      // this replica group's id
  std::string token;      // "" = none
  TlsConfig tls;
  QuorumParams params;    // quorum.h
  // The group's node count (1..64), sent on every Sync: the same on every
  // node of the group. 1: this client is the whole group.
  int parts = 1;
  // This node's id within its group (<= 128 bytes, no control character),
  // sent on every Watch; "" for a group of one node.
  std::string node = "";
  // FtSyncRequest.compact_sources, sent on every Sync: 0 asks for the
  // whole quorum; n > 0 for the group's own part with at most n heal
  // sources (SyncAnswer.part; a server older than the field answers with
  // the whole quorum all the same).
  uint32_t compact_sources = 0;
  // The longest one Sync may wait for its answer (the server unreachable,
  // or no quorum forming): then DeadlineExceeded. nullopt: for ever.
  std::optional<Duration> sync_timeout = std::nullopt;
};

class FtClient {
 public:
  using Post = std::function<void(std::function<void()>)>;

  FtClient(FtClientOptions options, Post post);
  ~FtClient();  // cancels open calls
  FtClient(const FtClient&) = delete;
  FtClient& operator=(const FtClient&) = delete;

  // The group's per-step call (call.group is ignored: options.group is
  // sent). `done` gets the SyncAnswer (its group is options.group; `part`
  // set when the server answered compactly), or an error as the header
  // says. The server holds the call until the group's
  // quorum forms, for at most options.sync_timeout (then DeadlineExceeded).
  //
  // `part`: this node's part of the group's call, in 0..options.parts-1
  // (sent with options.parts). The server joins the parts' calls
  // (ft_parts.h) and `done` gets the group's answer once every part asked;
  // InvalidArgument when the parts disagree (their committed steps).
  void Sync(const SyncCall& call, int part, std::function<void(const Result<SyncAnswer>&)> done);

  // Opens this node's watch of the group (options.node; a previous one's
  // callbacks stop: the server
  // ends it when this one arrives). `on_lost` per push; `on_end` once when
  // the stream ends: Aborted when a newer watch replaced it, Unavailable
  // when the server went away, or the refusal. `on_open` (optional) once
  // when the server holds the watch: from then on the group heartbeats.
  void Watch(std::function<void(const std::string& group, int64_t quorum_id, const std::string& reason)> on_lost,
             std::function<void(const Status&)> on_end, std::function<void()> on_open = nullptr);
  // Cancels the open watch: the server takes the group as lost. Its
  // callbacks are not called after this.
  void CancelWatch();

  // `done` gets OK or the error; bounded by `timeout` (DeadlineExceeded).
  // `finished_step`: the group finished training there (a leave that is no
  // loss; the run is then over for every group that asks later).
  void Leave(const std::string& reason, Duration timeout, std::function<void(const Status&)> done,
             std::optional<int64_t> finished_step = std::nullopt);

  const FtClientOptions& options() const { return options_; }

 private:
  class Impl;
  FtClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctrun::rdzv
