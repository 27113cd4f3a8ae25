// The first half of the rendezvous setup: the LaunchConfig resolved ONCE
// into a RendezvousPlan, plain data that says which handler this node runs
// and everything it needs (endpoint, ports, token, TLS, the machine's
// parameters, this node's identity). MakeRendezvous (launcher/rdzv/setup.h)
// turns the plan into the handler; nothing here builds one, starts a server
// or opens a connection.
//
//   --nnodes 1 / --standalone        kLocal: no network (LaunchConfig::
//                                    local_rendezvous)
//   --rdzv-backend c10d (or grpc)    kGrpc: the server at --rdzv-endpoint
//                                    (default port 29400), hosted by the
//                                    agent on that host (or is_host=1); with
//                                    --nnodes 1 too when --rdzv-endpoint is
//                                    given
//   --rdzv-backend static            kGrpc with fixed membership: the
//                                    node-rank-0 agent hosts ctrun's rendezvous
//                                    at --master-addr:(--master-port + 1) (or at
//                                    --rdzv-endpoint when given); group ranks
//                                    are the node ranks; workers get exactly
//                                    --master-addr:--master-port
//   --rdzv-backend etcd-v3           kEtcd: the etcd cluster at --rdzv-endpoint
//
// Includes go one way: setup -> resolve -> credentials, launcher/cli,
// launcher/net. Thread model: free functions. ResolveLocal, ThisNode and
// the store's place are in resolve.cc (both binaries); ResolveRendezvous,
// which reads credentials with gRPC's TLS types, in resolve_remote.cc
// (ctrun-full only: launcher/rdzv/remote_setup.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/cli/launch_config.h"
#include "rendezvous/grpc/net/credentials.h"
#include "rendezvous/machine/node_order.h"
#include "rendezvous/machine/rdzv_params.h"

namespace ctrun::launcher {

enum class HandlerKind {
  kLocal,  // LocalRendezvous
  kGrpc,   // GrpcRendezvous, its server hosted here or joined
  kEtcd,   // EtcdRendezvous
};

// kGrpc: this agent tries to host the rendezvous server.
struct HostPlan {
  // "host:port" (an IP --rdzv-endpoint) or "0.0.0.0:port"; port 0 (HOST:0)
  // binds a free one, and the plan's endpoint then takes the bound port.
  std::string listen_address;
  // is_host=1 was given: failing to listen is an error. Otherwise the
  // hosting was inferred, and a server that cannot listen means another
  // agent hosts it: this one joins.
  bool required = false;
  // --rdzv-conf metrics_port: also serve /metrics, the status page and
  // /api/runs over HTTP on listen_address's host at this port (0 = a free
  // one); nullopt = not at all.
  std::optional<int> metrics_port;
  // The server's ServerOptions::port_sniff_deadline (LaunchConfig's).
  std::optional<std::chrono::milliseconds> port_sniff_deadline;
};

struct RendezvousPlan {
  HandlerKind kind = HandlerKind::kLocal;
  std::string run_id;
  int local_world_size = 1;  // --nproc-per-node

  // kLocal: the workers' MASTER_ADDR, and MASTER_PORT when > 0 (--master-port
  // given); 0 = a free port (or the agent store's, see setup.h).
  std::string master_addr;
  int master_port = 0;

  // kGrpc and kEtcd.
  std::string endpoint;  // "host:port" or "[v6]:port": the server, or the etcd member
  rdzv::Params params;
  rdzv::NodeId node;         // {--local-addr or the host name, pid, 0}
  uint64_t incarnation = 0;  // random, fresh per process
  std::optional<int> hint_rank;
  std::string advertise_addr;  // published as MASTER_ADDR; kGrpc: "" = as the server sees it
  Seconds join_timeout{600};
  Seconds close_timeout{30};

  // kGrpc only.
  std::string token;
  rdzv::TlsConfig tls;
  std::optional<HostPlan> host;  // nullopt: only join
  // Static backend: workers get exactly --master-addr/--master-port.
  std::optional<std::pair<std::string, int>> fixed_master;
  Seconds exit_barrier_timeout{300};
};

// The plan for `config` (after ParseCommandLine). Reads the token and TLS
// files (kGrpc only) and, for c10d, resolves --rdzv-endpoint's host to tell
// whether it is this machine (IsLocalHost; the answer is used only when
// is_host is not given). Errors, all InvalidArgument: a combination the backend cannot serve
// (a missing endpoint, --rdzv-backend etcd or etcd-v2, MIN:MAX with the
// static backend, tls_ca without a certificate on the hosting node), an
// unreadable token or TLS file, machine parameters rdzv::ValidateParams
// refuses (naming the setting), an endpoint with port 0 (HOST:0) on a node
// that would join rather than host (only the hosting agent can bind a free
// port; its server's port() is the one to use, see remote_setup.cc).
Result<RendezvousPlan> ResolveRendezvous(const LaunchConfig& config, const Environment& env);

// The kLocal plan of a `config` whose local_rendezvous() holds (what
// ResolveRendezvous returns for it); never fails.
RendezvousPlan ResolveLocal(const LaunchConfig& config);

// This agent's identity in the rendezvous: {--local-addr or the host name,
// this process's pid, 0}. rdzv::ToString gives "node3#4242": `ctrun
// status`'s NODE and the events file's "node_id".
rdzv::NodeId ThisNode(const LaunchConfig& config);

// The port this node's agent binds for the workers' store, or nullopt when
// it hosts none (--no-agent-store; a static-backend node other than node
// rank 0). 0 means any free port:
//   one node     --master-port when given, else any (local_rendezvous();
//                one node with c10d and an endpoint is as c10d below)
//   static       --master-port on node rank 0 (workers get exactly
//                --master-addr:--master-port)
//   c10d, etcd   any: each agent advertises its store's port when it joins,
//                and the round's group rank 0 is the one the workers use.
//                c10d: only when the rendezvous server does not serve the
//                store on its own port for the round (it does by default:
//                one port per job, rendezvous/grpc/net/port_mux.h)
std::optional<int> AgentStorePort(const LaunchConfig& config);

// The address that store listens on: the one its workers are given as
// MASTER_ADDR where ctrun knows it (one node: --local-addr, else
// --master-addr; several nodes: --local-addr when it is an IP address), else
// "" (every interface, as torch's TCPStore server binds).
std::string AgentStoreHost(const LaunchConfig& config);

}  // namespace ctrun::launcher
