// How the project's gRPC clients (agents, `ctrun status`, the fault-tolerance
// client, the etcd client, the load benches) reconnect: quickly, to find a
// server that starts late, but giving each attempt time to finish.
#pragma once

#include <grpcpp/support/channel_arguments.h>

namespace ctrun::rdzv {

// Retries a refused connection after 100 ms, backing off to 1 s at most
// (gRPC's defaults: 1 s, up to 2 min). Each attempt (TCP connect, TLS
// handshake, HTTP/2 settings) may take up to kConnectTimeoutMs. gRPC reads
// that bound from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, whose name hides it:
// set to 100 ms it failed TLS handshakes on a loaded host ("handshaker
// shutdown") and would on any link slower than that.
inline constexpr int kConnectTimeoutMs = 10'000;

inline void SetQuickReconnect(grpc::ChannelArguments& args) {
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kConnectTimeoutMs);
}

}  // namespace ctrun::rdzv
