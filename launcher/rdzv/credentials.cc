#include "launcher/rdzv/credentials.h"

namespace ctrun::launcher {

// token_file wins over $CTRUN_RDZV_TOKEN; read the same way as ctrund's.
Result<std::string> RendezvousToken(const LaunchConfig& config, const Environment& env) {
  if (config.rdzv_conf.token_file) return rdzv::ReadTokenFile(*config.rdzv_conf.token_file, "--rdzv-conf token_file");
  auto it = env.find("CTRUN_RDZV_TOKEN");
  std::string token = it == env.end() ? std::string() : it->second;
  CTRUN_RETURN_IF_ERROR(rdzv::CheckToken(token, "CTRUN_RDZV_TOKEN"));
  return token;
}

Result<rdzv::TlsConfig> RendezvousTls(const RdzvConf& conf) {
  rdzv::TlsFiles files;
  files.cert = conf.tls_cert;
  files.key = conf.tls_key;
  files.ca = conf.tls_ca;
  files.server_name = conf.tls_server_name;
  files.cert_flag = "--rdzv-conf tls_cert";
  files.key_flag = "--rdzv-conf tls_key";
  files.ca_flag = "--rdzv-conf tls_ca";
  if (files.Any() && files.ca.empty()) {
    return Status::InvalidArgument(
        "--rdzv-conf tls_cert/tls_key without tls_ca: every node needs tls_ca (the CA that signed the "
        "rendezvous server's certificate) to verify the server");
  }
  if (!conf.tls_server_name.empty() && files.ca.empty()) {
    return Status::InvalidArgument("--rdzv-conf tls_server_name without tls_ca: give tls_ca as well (TLS is off)");
  }
  return rdzv::LoadTls(files);
}

}  // namespace ctrun::launcher
