// HostRendezvousServer (host_server.h): the rendezvous server an agent hosts.
#include "launcher/rdzv/host_server.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "rendezvous/grpc/server/server.h"
#include "rendezvous/metrics/metrics_http.h"

namespace ctrun::launcher {

namespace {

// The hosted server, and its status page when --rdzv-conf metrics_port was
// given (stopped first: its pages read the server).
class ServerHandle : public HostedServer {
 public:
  ServerHandle(std::unique_ptr<rdzv::RendezvousServer> server, std::string run_id)
      : server_(std::move(server)), run_id_(std::move(run_id)) {}
  ~ServerHandle() override { metrics_.reset(); }
  void Stop() override {
    metrics_.reset();
    server_->Shutdown();
  }
  void WhenDrained(std::function<void()> cb) override { server_->WhenDrained(run_id_, std::move(cb)); }

  // Serves the server's metrics, status page and /api/runs on host:port
  // (port 0 = a free one) and says where; the error of MetricsHttpServer::Start.
  Status ServePages(const std::string& host, int port) {
    rdzv::RendezvousServer* server = server_.get();
    auto started = rdzv::MetricsHttpServer::Start(
        host, port, {[server] { return server->MetricsText(); }, [server] { return server->RunsJson(); }});
    if (!started.ok()) return started.status();
    metrics_ = std::move(*started);
    const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    spdlog::info("serving the status page on http://{}:{}/", shown, metrics_->port());
    return Status::Ok();
  }

 private:
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::string run_id_;
  std::unique_ptr<rdzv::MetricsHttpServer> metrics_;  // declared last: destroyed before server_
};

// The host part of a "host:port" or "[v6]:port" listen address.
std::string ListenHost(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

// "host:port" or "[v6]:port" with its port replaced by `port`.
std::string WithPort(const std::string& endpoint, int port) {
  return endpoint.substr(0, endpoint.rfind(':') + 1) + std::to_string(port);
}

// The port of a "host:port" or "[v6]:port" listen address.
int ListenPort(const std::string& listen) { return std::atoi(listen.c_str() + listen.rfind(':') + 1); }

}  // namespace

Result<std::unique_ptr<HostedServer>> HostRendezvousServer(RendezvousPlan& plan, const HostPlan& host) {
  rdzv::ServerOptions so;
  so.listen_address = host.listen_address;
  so.mode = rdzv::RunRegistry::Mode::kFixed;
  so.runs = {rdzv::FixedRun{plan.run_id, plan.params}};
  so.token = plan.token;
  so.tls = plan.tls;
  so.tls.ca_pem.clear();  // an agent-hosted server does not ask for client certificates (ctrund can)
  so.port_sniff_deadline = host.port_sniff_deadline;
  Result<std::unique_ptr<rdzv::RendezvousServer>> server = rdzv::RendezvousServer::Start(so);
  if (server.ok()) {
    if (ListenPort(so.listen_address) == 0) plan.endpoint = WithPort(plan.endpoint, (*server)->port());
    spdlog::info("hosting the rendezvous for run '{}' on {}", plan.run_id, (*server)->address());
    auto handle = std::make_unique<ServerHandle>(std::move(*server), plan.run_id);
    if (host.metrics_port) {
      Status pages = handle->ServePages(ListenHost(so.listen_address), *host.metrics_port);
      if (!pages.ok()) {
        // The hint names ctrund's flag; here the port comes from --rdzv-conf.
        std::string why = pages.message();
        if (size_t at = why.find("--metrics-port"); at != std::string::npos) why.replace(at, 14, "metrics_port");
        return Status::Unavailable("--rdzv-conf metrics_port=" + std::to_string(*host.metrics_port) + ": " + why);
      }
    }
    return std::unique_ptr<HostedServer>(std::move(handle));
  }
  if (host.required) return Status::Unavailable("--rdzv-conf is_host=1: " + server.status().message());
  if (ListenPort(so.listen_address) == 0) {  // there is no port to join instead
    return Status::Unavailable("--rdzv-endpoint " + plan.endpoint + ": " + server.status().message());
  }
  // The normal case for every node but one: the bind failure is not an
  // error here (it is above, where this node was meant to host). The
  // caller says it joins.
  spdlog::debug("not hosting the rendezvous at {}: {}", plan.endpoint, server.status().message());
  return std::unique_ptr<HostedServer>();
}

}  // namespace ctrun::launcher
