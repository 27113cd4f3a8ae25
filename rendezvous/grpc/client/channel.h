// The channel every client of the rendezvous service makes: the endpoint,
// the TLS settings (or plaintext) and the quick reconnect of
// channel_backoff.h. Clients made with the same endpoint and settings share
// gRPC's connection.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "rendezvous/grpc/client/channel_backoff.h"
#include "rendezvous/grpc/net/credentials.h"

namespace ctrun::rdzv {

// A channel to `endpoint` with `tls`'s credentials; `args` may carry a
// client's own settings (e.g. keep-alive pings), the reconnect settings are
// added to them.
inline std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& endpoint, const TlsConfig& tls,
                                                        grpc::ChannelArguments args = {}) {
  SetQuickReconnect(args);
  std::shared_ptr<grpc::ChannelCredentials> credentials = ChannelCredentialsFor(tls, args);
  return grpc::CreateCustomChannel(endpoint, credentials, args);
}

}  // namespace ctrun::rdzv
