// Rendezvous authentication material: the shared token and the optional TLS
// certificates, read from files and checked once, then turned into gRPC
// credentials by the server and the client.
//
// Loading (ReadToken, LoadTls) does the file I/O and every check, so that a
// bad file is a one-line error at start-up rather than a failed handshake
// later. Making credentials (ServerCredentialsFor, ChannelCredentialsFor)
// does no I/O and cannot fail. docs/security.md explains the model.
//
// Thread model: free functions over plain data; safe from any thread.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"

namespace grpc {
class ServerCredentials;
class ChannelCredentials;
class ChannelArguments;
}  // namespace grpc

namespace ctrun::rdzv {

// Checked PEM text. Which side uses what:
// - server: TLS when cert_pem is set (key_pem is its key); ca_pem set means
//   every client must present a certificate signed by it (mutual TLS).
// - client: TLS when ca_pem is set (the server's certificate must be signed
//   by it); cert_pem/key_pem, when set, are presented to the server.
// All empty = plaintext (no TLS).
struct TlsConfig {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  // Client only: the name checked against the server's certificate instead
  // of the endpoint's host ("" = the host).
  std::string server_name;

  bool ServerSide() const { return !cert_pem.empty(); }
  bool ClientSide() const { return !ca_pem.empty(); }
};

// Paths as the user gave them ("" = not given) and, for error messages,
// how the user spells each one (e.g. "--tls-cert" or "--rdzv-conf tls_cert").
struct TlsFiles {
  std::string cert, key, ca, server_name;
  std::string cert_flag = "tls_cert", key_flag = "tls_key", ca_flag = "tls_ca";

  bool Any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// Reads and checks the files named in `files`: each must be readable PEM of
// the right kind (certificate(s) for cert and ca, a private key for key),
// the key must belong to the certificate, and cert and key come together.
// Returns the loaded config (all empty when no file was named).
// Errors: InvalidArgument naming the flag, the path and the fix.
Result<TlsConfig> LoadTls(const TlsFiles& files);

// The shared token from `path` (trailing whitespace dropped). `flag` names
// the input in messages ("--token-file", "--rdzv-conf token_file").
// Errors: InvalidArgument when the file cannot be read, is empty, or the
// token is not one line of printable ASCII.
Result<std::string> ReadTokenFile(const std::string& path, const std::string& flag);

// Checks a token given directly (e.g. $CTRUN_RDZV_TOKEN, named by `source`).
// "" is allowed (no token). Errors: InvalidArgument as ReadTokenFile.
Status CheckToken(const std::string& token, const std::string& source);

// Server credentials for `tls`: insecure when !tls.ServerSide(); TLS with
// tls.cert_pem/key_pem otherwise, requiring and verifying client
// certificates against tls.ca_pem when it is set. `tls` must have come from
// LoadTls (unchecked PEM makes the listener fail to start).
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsConfig& tls);

// Channel credentials for `tls`: insecure when !tls.ClientSide(); TLS
// verifying the server against tls.ca_pem (and presenting
// tls.cert_pem/key_pem when set) otherwise. Adds the server-name override
// to `args` when tls.server_name is set.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsConfig& tls,
                                                                grpc::ChannelArguments& args);

}  // namespace ctrun::rdzv
