#include "rendezvous/metrics/metrics_http.h"

#include <spdlog/spdlog.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <thread>

#include "rendezvous/metrics/status_page.h"
#include "rendezvous/net/accept_loop.h"
#include "rendezvous/net/listen_tcp.h"

namespace ctrun::rdzv {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kMaxHead = 8192;
constexpr std::chrono::seconds kReadTimeout{10};

// The status page may run only its own inline script and style, and talk
// only to this server: no external asset can load even if one slipped in.
constexpr std::string_view kPageHeaders =
    "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'\r\n";

std::string Response(std::string_view status, std::string_view content_type, std::string_view body,
                     std::string_view extra_headers = "") {
  std::string out = "HTTP/1.1 ";
  out += status;
  out += "\r\nContent-Type: ";
  out += content_type;
  out += "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
  out += extra_headers;
  out += "Connection: close\r\n\r\n";
  out += body;
  return out;
}

}  // namespace

std::string MetricsHttpResponse(std::string_view head, const HttpPages& pages) {
  const std::string_view line = head.substr(0, head.find("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos ||
      line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0) {
    return Response("400 Bad Request", "text/plain", "not an HTTP/1.x request line\n");
  }
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  if (method != "GET") {
    return Response("405 Method Not Allowed", "text/plain", "use GET on /, /api/runs or /metrics\n", "Allow: GET\r\n");
  }
  if (target == "/metrics") return Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", pages.metrics());
  if (target == "/api/runs") return Response("200 OK", "application/json; charset=utf-8", pages.runs_json());
  if (target == "/") return Response("200 OK", "text/html; charset=utf-8", StatusPageHtml(), kPageHeaders);
  return Response("404 Not Found", "text/plain",
                  "not found: the status page is at /, its JSON at /api/runs, the metrics at /metrics\n");
}

class MetricsHttpServer::Impl {
 public:
  explicit Impl(HttpPages pages) : acceptor_(io_), pages_(std::move(pages)) {}

  ~Impl() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Status Listen(const std::string& host, int port) {
    const std::string where = host + ":" + std::to_string(port);
    boost::system::error_code ec;
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      return Status::Unavailable("cannot listen on " + where + " for metrics: " + ec.message() +
                                 " (give an address of this host in --listen)");
    }
    const tcp::endpoint endpoint = results.begin()->endpoint();
    const Listening listening = ListenTcp(acceptor_, {endpoint.address(), endpoint.port()});
    if (const boost::system::error_code& e = listening.error) {
      return Status::Unavailable("cannot listen on " + where + " for metrics: " + e.message() +
                                 (e == asio::error::address_in_use ? " (pick another --metrics-port, or 0)" : ""));
    }
    port_ = listening.port;
    accepting_.Start();
    thread_ = std::thread([this] { io_.run(); });
    return Status::Ok();
  }

  int port() const { return port_; }

 private:
  struct Connection {
    explicit Connection(asio::io_context& io) : socket(io), timer(io), buffer(kMaxHead) {}
    tcp::socket socket;
    asio::steady_timer timer;
    asio::streambuf buffer;
    std::string reply;
  };

  void Serve(tcp::socket socket) {
    auto c = std::make_shared<Connection>(io_);
    c->socket = std::move(socket);
    c->timer.expires_after(kReadTimeout);
    c->timer.async_wait([c](boost::system::error_code ec) {
      if (!ec) c->socket.close();
    });
    asio::async_read_until(c->socket, c->buffer, "\r\n\r\n", [this, c](boost::system::error_code ec, size_t n) {
      c->timer.cancel();
      if (ec) return;  // closed, too long, or too slow: no answer
      std::string head(asio::buffers_begin(c->buffer.data()), asio::buffers_begin(c->buffer.data()) + n - 4);
      c->reply = MetricsHttpResponse(head, pages_);
      asio::async_write(c->socket, asio::buffer(c->reply), [c](boost::system::error_code, size_t) {
        boost::system::error_code ignored;
        c->socket.shutdown(tcp::socket::shutdown_both, ignored);
      });
    });
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  AcceptLoop accepting_{acceptor_, "the metrics endpoint", [this](tcp::socket socket) { Serve(std::move(socket)); }};
  HttpPages pages_;
  int port_ = 0;
  std::thread thread_;
};

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& host, int port,
                                                                    HttpPages pages) {
  auto impl = std::make_unique<Impl>(std::move(pages));
  CTRUN_RETURN_IF_ERROR(impl->Listen(host, port));
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(impl)));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsHttpServer::~MetricsHttpServer() = default;

int MetricsHttpServer::port() const { return impl_->port(); }

}  // namespace ctrun::rdzv
