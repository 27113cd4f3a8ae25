// ctrund: the standalone rendezvous daemon. Serves any number of run ids
// (each created by its first Join) until SIGTERM or SIGINT. docs/daemon.md.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/open_files.h"
#include "rendezvous/grpc/net/credentials.h"
#include "rendezvous/grpc/net/grpc_process.h"
#include "rendezvous/grpc/server/server.h"
#include "rendezvous/metrics/metrics_http.h"

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

struct DaemonFlags {
  std::string listen = "0.0.0.0:29400";
  std::string token_file;
  std::string tls_cert, tls_key, tls_client_ca;
  std::string log_level = "info";
  std::string state_dir;
  int metrics_port = -1;  // -1: no metrics endpoint
  bool no_worker_stores = false;  // one port per job: see ServerOptions::serve_stores
  std::string closed_run_ttl = "3600";  // seconds; checked by ClosedRunTtl
};

// The longest --closed-run-ttl: a year.
constexpr double kMaxClosedRunTtlS = 365.0 * 24 * 3600;

// --closed-run-ttl as a duration: a number of seconds in [0, a year].
ctrun::Result<ctrun::Duration> ClosedRunTtl(const std::string& value) {
  char* end = nullptr;
  const double s = std::strtod(value.c_str(), &end);
  if (value.empty() || end == value.c_str() || *end != '\0' || !(s >= 0) || s > kMaxClosedRunTtlS) {
    return ctrun::Status::InvalidArgument(
        "--closed-run-ttl '" + value.substr(0, 64) + (value.size() > 64 ? "...'" : "'") +
        ": give the seconds a closed run is kept, from 0 (forget it at once) to " +
        std::to_string(static_cast<long>(kMaxClosedRunTtlS)));
  }
  return std::chrono::duration_cast<ctrun::Duration>(std::chrono::duration<double>(s));
}

// The host part of --listen ("0.0.0.0:29400" -> "0.0.0.0", "[::1]:0" -> "::1").
std::string ListenHost(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

// Whether --listen's host reaches beyond this machine: anything but a
// loopback address or "localhost" (0.0.0.0 and :: are every interface).
bool ListensBeyondLoopback(const std::string& listen) {
  const std::string host = ListenHost(listen);
  return !(host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0);
}

constexpr const char* kExamples = R"(
Examples:
  ctrund --listen 127.0.0.1:29400                 # this machine's agents only
  ctrund --token-file /etc/ctrun/token            # every interface; nodes send the same token
  ctrund --tls-cert srv.pem --tls-key srv.key --token-file /etc/ctrun/token
  ctrund --state-dir /var/lib/ctrund --metrics-port 9400   # resumes its runs after a restart
Then on every node: ctrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \
  --rdzv-endpoint THIS_HOST:29400 --rdzv-id job1 train.py
Listening beyond loopback (the default 0.0.0.0) without --token-file or TLS lets
anyone who reaches the port join or end a run: ctrund warns once at start.
docs/daemon.md has the rest.)";

// Every usage error (a bad flag, file or environment value; exit 2) ends
// the same way, whether or not the message already names the fix.
int Usage(const std::string& message) {
  std::fprintf(stderr, "ctrund: %s (see ctrund --help)\n", message.c_str());
  return kExitUsage;
}

// The token from --token-file (trailing whitespace dropped), else from
// CTRUN_RDZV_TOKEN, else "" (no token).
ctrun::Result<std::string> ReadToken(const DaemonFlags& flags) {
  if (!flags.token_file.empty()) return ctrun::rdzv::ReadTokenFile(flags.token_file, "--token-file");
  const char* env = std::getenv("CTRUN_RDZV_TOKEN");
  std::string token = env ? env : "";
  CTRUN_RETURN_IF_ERROR(ctrun::rdzv::CheckToken(token, "CTRUN_RDZV_TOKEN"));
  return token;
}

// CTRUN_PORT_SNIFF_DEADLINE_MS (a knob for tests): a positive number of
// milliseconds, else nullopt (the mux's default; anything else is ignored).
std::optional<std::chrono::milliseconds> PortSniffDeadline() {
  const char* v = std::getenv("CTRUN_PORT_SNIFF_DEADLINE_MS");
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  const long long ms = std::strtoll(v, &end, 10);
  if (*end != '\0' || ms <= 0) return std::nullopt;
  return std::chrono::milliseconds(ms);
}

ctrun::Result<ctrun::rdzv::TlsConfig> LoadTls(const DaemonFlags& flags) {
  ctrun::rdzv::TlsFiles files;
  files.cert = flags.tls_cert;
  files.key = flags.tls_key;
  files.ca = flags.tls_client_ca;
  files.cert_flag = "--tls-cert";
  files.key_flag = "--tls-key";
  files.ca_flag = "--tls-client-ca";
  if (!files.ca.empty() && files.cert.empty()) {
    return ctrun::Status::InvalidArgument(
        "--tls-client-ca needs --tls-cert and --tls-key (client certificates are checked only over TLS)");
  }
  return ctrun::rdzv::LoadTls(files);
}

// Declares ctrund's flags on `app`; parsing fills `flags`, which must
// outlive `app`.
void AddFlags(CLI::App& app, DaemonFlags& flags) {
  app.add_option("--listen", flags.listen, "HOST:PORT to listen on (port 0 picks one)")->capture_default_str();
  app.add_option("--token-file", flags.token_file,
                 "file holding the shared token every node must send (default: $CTRUN_RDZV_TOKEN; none if unset)");
  app.add_option("--tls-cert", flags.tls_cert, "PEM certificate to serve TLS with (with --tls-key; default: plaintext)");
  app.add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", flags.tls_client_ca,
                 "PEM CA bundle: require every client to present a certificate it signed (mutual TLS)");
  app.add_option("--state-dir", flags.state_dir,
                 "directory to keep every run's state in, so that a restarted ctrund resumes the runs "
                 "(created if missing; default: none, state is lost with the process)");
  app.add_option("--metrics-port", flags.metrics_port,
                 "serve Prometheus metrics at http://HOST:PORT/metrics and a live status page at http://HOST:PORT/, "
                 "HOST being --listen's (0 picks a port; default: neither)")
      ->check(CLI::Range(0, 65535));
  // One port per job (docs/daemon.md): the workers' c10d stores share --listen's port.
  app.add_flag("--no-worker-stores", flags.no_worker_stores,
               "do not serve the workers' c10d stores on --listen's port (the agents then host them on "
               "ports of their own; implied by --state-dir)");
  app.add_option("--closed-run-ttl", flags.closed_run_ttl,
                 "SECONDS a run is remembered after it closed and its last node left (0: forget it at once); "
                 "then its id is unknown here, and may start a new run")
      ->type_name("SECONDS")
      ->capture_default_str();
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
}

// Serves `rdzv`'s MetricsText and status page on --metrics-port at --listen's host and says
// where on stdout; null when --metrics-port is not given. The error of
// MetricsHttpServer::Start when it cannot. `rdzv` must outlive the result.
ctrun::Result<std::unique_ptr<ctrun::rdzv::MetricsHttpServer>> ServeMetrics(const DaemonFlags& flags,
                                                                           ctrun::rdzv::RendezvousServer* rdzv) {
  if (flags.metrics_port < 0) return std::unique_ptr<ctrun::rdzv::MetricsHttpServer>();
  auto started = ctrun::rdzv::MetricsHttpServer::Start(
      ListenHost(flags.listen), flags.metrics_port,
      {[rdzv] { return rdzv->MetricsText(); }, [rdzv] { return rdzv->RunsJson(); }});
  if (!started.ok()) return started.status();
  std::string host = ListenHost(flags.listen);
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  std::printf("ctrund: serving the status page on http://%s:%d/\n", host.c_str(), (*started)->port());
  std::printf("ctrund: serving metrics on http://%s:%d/metrics\n", host.c_str(), (*started)->port());
  return std::move(*started);
}

}  // namespace

int main(int argc, char** argv) {
  DaemonFlags flags;
  CLI::App app("ctrund: the ctrun rendezvous daemon. Serves every --rdzv-id that joins it.", "ctrund");
  AddFlags(app, flags);
  app.footer(kExamples);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    return Usage(e.what());
  }
  // One descriptor per agent's connection (and per worker's, for the
  // stores it serves): 10,000 agents need more than the default 1,024.
  ctrun::RaiseOpenFilesLimit();

  ctrun::Result<std::string> token = ReadToken(flags);
  if (!token.ok()) return Usage(token.status().message());
  ctrun::Result<ctrun::rdzv::TlsConfig> tls = LoadTls(flags);
  if (!tls.ok()) return Usage(tls.status().message());
  ctrun::Result<ctrun::Duration> closed_run_ttl = ClosedRunTtl(flags.closed_run_ttl);
  if (!closed_run_ttl.ok()) return Usage(closed_run_ttl.status().message());

  auto logger = spdlog::stderr_color_mt("ctrund");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [ctrund] [%l] %v");
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  ctrun::rdzv::RouteGrpcLogsToSpdlog(/*warn_handshake_failures=*/true);

  // Blocked before any thread starts (gRPC's start in ConfigureGrpcProcess),
  // so only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ctrun::rdzv::ConfigureGrpcProcess();

  ctrun::rdzv::ServerOptions options;
  options.listen_address = flags.listen;
  options.mode = ctrun::rdzv::RunRegistry::Mode::kAutoCreate;
  options.token = *token;
  options.tls = *tls;
  options.state_dir = flags.state_dir;
  options.closed_run_ttl = *closed_run_ttl;
  options.port_sniff_deadline = PortSniffDeadline();
  // A store's keys live in memory only: with --state-dir, a restarted ctrund
  // would resume running rounds whose workers lost their store. So the agents
  // keep hosting them (docs/daemon.md, "The workers' stores").
  options.serve_stores = !flags.no_worker_stores && flags.state_dir.empty();
  auto server = ctrun::rdzv::RendezvousServer::Start(options);
  if (!server.ok()) {
    if (server.status().IsInvalidArgument()) return Usage(server.status().message());
    std::fprintf(stderr, "ctrund: %s\n", server.status().message().c_str());
    return kExitFailure;
  }
  std::printf("ctrund: serving rendezvous on %s%s\n", (*server)->address().c_str(),
              !tls->ServerSide() ? "" : tls->ca_pem.empty() ? " (TLS)" : " (TLS, client certificates required)");
  if (ListensBeyondLoopback(flags.listen) && token->empty() && !tls->ServerSide()) {
    spdlog::warn("listening on {} with no token and no TLS: anyone who can reach this port can join or end a "
                 "run (give --token-file, or --tls-cert and --tls-key, or --listen 127.0.0.1:PORT)",
                 flags.listen);
  }
  auto metrics = ServeMetrics(flags, server->get());
  if (!metrics.ok()) {
    std::fprintf(stderr, "ctrund: %s\n", metrics.status().message().c_str());
    return kExitFailure;
  }
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  spdlog::info("got {}, shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  metrics->reset();
  (*server)->Shutdown();
  return 0;
}
