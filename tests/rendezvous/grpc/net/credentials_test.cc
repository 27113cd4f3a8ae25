// Token and TLS material (credentials.h): every file error is one line naming
// the flag; then real gRPC over TLS on 127.0.0.1 between RendezvousServer and
// RendezvousClient: the right CA connects, a wrong CA, plaintext against TLS
// and a missing client certificate (mutual TLS) are refused. Fixtures:
// tests/rendezvous/grpc/data/tls/README.md. Waits are bounded condition waits on
// the client's callback, never sleeps.
#include "rendezvous/grpc/net/credentials.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>

#include "rendezvous/grpc/client/client.h"
#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/client_inbox.h"
#include "tests/source_path.h"

namespace ctrun::rdzv {
namespace {

std::string Fixture(const std::string& name) {
  return (ctrun::testing::FromExeDir(CTRUN_TLS_DATA_DIR) / name).string();
}

TlsFiles Files(const std::string& cert, const std::string& key, const std::string& ca) {
  TlsFiles f;
  f.cert = cert.empty() ? "" : Fixture(cert);
  f.key = key.empty() ? "" : Fixture(key);
  f.ca = ca.empty() ? "" : Fixture(ca);
  return f;
}

std::string LoadError(const TlsFiles& files) {
  Result<TlsConfig> tls = LoadTls(files);
  REQUIRE_FALSE(tls.ok());
  CHECK(tls.status().IsInvalidArgument());
  CHECK(tls.status().message().find('\n') == std::string::npos);
  return tls.status().message();
}

// A file in the temp dir, removed at scope exit.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    char name[] = "/tmp/ctrun_cred_XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    path_ = name;
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST_CASE("no TLS file given loads an empty config: plaintext on both sides") {
  Result<TlsConfig> tls = LoadTls(TlsFiles{});
  REQUIRE(tls.ok());
  CHECK_FALSE(tls->ServerSide());
  CHECK_FALSE(tls->ClientSide());
}

TEST_CASE("a certificate, its key and a CA load") {
  Result<TlsConfig> tls = LoadTls(Files("server.pem", "server.key", "ca.pem"));
  REQUIRE(tls.ok());
  CHECK(tls->ServerSide());
  CHECK(tls->ClientSide());
  CHECK(tls->cert_pem.find("BEGIN CERTIFICATE") != std::string::npos);
}

TEST_CASE("TLS file errors name the flag, the path and the fix") {
  TlsFiles cert_only = Files("server.pem", "", "");
  cert_only.cert_flag = "--tls-cert";
  cert_only.key_flag = "--tls-key";
  CHECK(LoadError(cert_only) == "--tls-cert given without --tls-key: give both (the certificate and its private key)");
  CHECK(LoadError(Files("", "server.key", "")).find("tls_key given without tls_cert") == 0);
  CHECK(LoadError(Files("missing.pem", "server.key", "")).find("tls_cert '" + Fixture("missing.pem") +
                                                               "': cannot read it") == 0);
  CHECK(LoadError(Files("README.md", "server.key", "")).find("no PEM certificate in it") != std::string::npos);
  CHECK(LoadError(Files("server.pem", "ca.pem", "")).find("tls_key '" + Fixture("ca.pem") +
                                                          "': no unencrypted PEM private key") == 0);
  CHECK(LoadError(Files("server.pem", "client.key", "")).find("is not the key of tls_cert") != std::string::npos);
  CHECK(LoadError(Files("expired.pem", "expired.key", "")).find("the certificate has expired") != std::string::npos);
  CHECK(LoadError(Files("", "", "server.key")).find("tls_ca '" + Fixture("server.key") + "': no PEM certificate") == 0);
}

TEST_CASE("a token file loses trailing whitespace, empty, binary or unreadable ones are refused") {
  TempFile good("s3cret-token \n\n");
  Result<std::string> token = ReadTokenFile(good.path(), "--token-file");
  REQUIRE(token.ok());
  CHECK(*token == "s3cret-token");

  TempFile blank(" \n");
  Result<std::string> empty = ReadTokenFile(blank.path(), "--token-file");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message() == "--token-file '" + blank.path() + "': the file is empty; put the shared token in it");

  TempFile binary(std::string("ab\0cd", 5));
  Result<std::string> bad = ReadTokenFile(binary.path(), "--rdzv-conf token_file");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("one line of printable ASCII") != std::string::npos);

  Result<std::string> missing = ReadTokenFile("/nonexistent/token", "--token-file");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("--token-file '/nonexistent/token': cannot read it") == 0);

  CHECK(CheckToken("", "CTRUN_RDZV_TOKEN").ok());
  CHECK_FALSE(CheckToken("two\nlines", "CTRUN_RDZV_TOKEN").ok());
}

using testing::Inbox;

std::unique_ptr<RendezvousServer> TlsServer(const TlsFiles& files, const std::string& token = "") {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  Params p;
  p.min_nodes = p.max_nodes = 2;
  options.runs.push_back({"job", p});
  Result<TlsConfig> tls = LoadTls(files);
  REQUIRE(tls.ok());
  options.tls = *tls;
  options.token = token;
  Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  REQUIRE(server.ok());
  return std::move(server).value();
}

// One GetState from a client with `files` (and `token`) to `server`.
Status Ask(const RendezvousServer& server, const TlsFiles& files, const std::string& token = "",
           const std::string& host = "127.0.0.1") {
  Result<TlsConfig> tls = LoadTls(files);
  REQUIRE(tls.ok());
  ClientOptions options;
  options.endpoint = host + ":" + std::to_string(server.port());
  options.run_id = "job";
  options.node = NodeId{"test", 1, 0};
  options.tls = *tls;
  options.token = token;
  Inbox inbox;
  RendezvousClient client(options, inbox.Poster());
  std::optional<Status> got;
  client.GetState(std::chrono::seconds(5), [&](const Result<Counts>& r) { got = r.status(); });
  REQUIRE(inbox.RunUntil([&] { return got.has_value(); }));
  UNSCOPED_INFO("GetState from " << host << " with tls_ca=" << files.ca << ": " << got->message());
  return *got;
}

TEST_CASE("over TLS a client with the server's CA is served") {
  auto server = TlsServer(Files("server.pem", "server.key", ""));
  CHECK(Ask(*server, Files("", "", "ca.pem")).ok());
  CHECK(Ask(*server, Files("", "", "ca.pem"), "", "localhost").ok());
}

TEST_CASE("a client with another CA fails at once with a TLS handshake error, not a wait") {
  auto server = TlsServer(Files("server.pem", "server.key", ""));
  Status s = Ask(*server, Files("", "", "other-ca.pem"));
  CHECK(s.code() == Status::Code::kFailedPrecondition);
  CHECK(s.message().find("TLS handshake with the rendezvous at 127.0.0.1:") == 0);
  CHECK(s.message().find("tls_ca") != std::string::npos);
}

TEST_CASE("a plaintext client is not served by a TLS server, nor a TLS client by a plaintext one") {
  auto tls_server = TlsServer(Files("server.pem", "server.key", ""));
  CHECK_FALSE(Ask(*tls_server, TlsFiles{}).ok());
  auto plain_server = TlsServer(TlsFiles{});
  Status s = Ask(*plain_server, Files("", "", "ca.pem"));
  CHECK(s.code() == Status::Code::kFailedPrecondition);
  CHECK(s.message().find("TLS handshake") != std::string::npos);
}

TEST_CASE("mutual TLS: a server with a client CA refuses a client without a certificate") {
  auto server = TlsServer(Files("server.pem", "server.key", "ca.pem"));
  CHECK_FALSE(Ask(*server, Files("", "", "ca.pem")).ok());
  CHECK(Ask(*server, Files("client.pem", "client.key", "ca.pem")).ok());
}

TEST_CASE("over TLS the token is still checked") {
  auto server = TlsServer(Files("server.pem", "server.key", ""), "right");
  CHECK(Ask(*server, Files("", "", "ca.pem"), "right").ok());
  Status s = Ask(*server, Files("", "", "ca.pem"), "wrong");
  CHECK(s.code() == Status::Code::kFailedPrecondition);
  CHECK(s.message().find("rendezvous token mismatch") == 0);
}

}  // namespace
}  // namespace ctrun::rdzv
