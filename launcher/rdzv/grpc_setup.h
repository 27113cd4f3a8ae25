// The multi-node half of MakeRendezvous (rendezvous_setup.h): the agent's
// gRPC rendezvous, hosted here or joined.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "rendezvous/grpc/credentials.h"

namespace ctrun::launcher {

// --rdzv-backend c10d or static with more than one node: see rendezvous_setup.h.
Result<std::unique_ptr<RendezvousHandler>> MakeGrpcRendezvous(boost::asio::io_context& io,
                                                              const LaunchConfig& config,
                                                              const Environment& env,
                                                              const StoreHosting& store);

// The rendezvous token: --rdzv-conf token_file, else $CTRUN_RDZV_TOKEN, else
// "" (none); read the same way as ctrund's. InvalidArgument naming the source.
Result<std::string> RendezvousToken(const LaunchConfig& config, const Environment& env);

// TLS from --rdzv-conf tls_cert/tls_key/tls_ca/tls_server_name (plaintext
// when none is given). InvalidArgument naming the key and the fix.
Result<rdzv::TlsConfig> RendezvousTls(const RdzvConf& conf);

}  // namespace ctrun::launcher
