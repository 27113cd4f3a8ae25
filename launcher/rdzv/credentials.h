// The rendezvous credentials a launcher node presents: the shared token and
// the TLS files of --rdzv-conf, read and checked once at start-up. Shared by
// the launch (launcher/rdzv/resolve.h) and `ctrun status`.
//
// Thread model: free functions; they read files and nothing else.
#pragma once

#include <string>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/cli/launch_config.h"
#include "rendezvous/grpc/net/credentials.h"

namespace ctrun::launcher {

// The rendezvous token: --rdzv-conf token_file, else $CTRUN_RDZV_TOKEN, else
// "" (none); read the same way as ctrund's. InvalidArgument naming the source.
Result<std::string> RendezvousToken(const LaunchConfig& config, const Environment& env);

// TLS from --rdzv-conf tls_cert/tls_key/tls_ca/tls_server_name (plaintext
// when none is given). InvalidArgument naming the key and the fix.
Result<rdzv::TlsConfig> RendezvousTls(const RdzvConf& conf);

}  // namespace ctrun::launcher
