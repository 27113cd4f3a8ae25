// OwnChannel: a load generator's channel to ctrund on a TCP connection of
// its own (not shared through gRPC's process-wide subchannel pool), as each
// simulated node or group would have, reconnecting as the project's clients
// do (channel_backoff.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "rendezvous/grpc/client/channel_backoff.h"

namespace bench_load {

inline std::shared_ptr<grpc::Channel> OwnChannel(const std::string& endpoint) {
  grpc::ChannelArguments args;
  ctrun::rdzv::SetQuickReconnect(args);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
}

}  // namespace bench_load
