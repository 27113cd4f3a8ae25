#include "rendezvous/grpc/net/port_mux.h"

#include <fcntl.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/grpc/net/port_sniff.h"
#include "rendezvous/net/listen_tcp.h"

namespace ctrun::rdzv {

namespace {

using boost::asio::ip::tcp;

// The most bytes read before a verdict: the HTTP/2 preface is 24 bytes, and
// one byte decides in every other case.
constexpr size_t kSniffBytes = 24;
// Connections that speak neither protocol logged as warnings before the
// rest go to debug: a port scanner must not flood the log.
constexpr int kMaxUnknownLogged = 10;

std::string Where(const HostPort& hp) { return hp.host + ":" + std::to_string(hp.port); }

Status CannotListen(const HostPort& hp, const boost::system::error_code& ec) {
  if (ec == boost::asio::error::address_in_use) {
    return Status::Unavailable("cannot listen on " + Where(hp) +
                               ": address in use (stop whatever holds it, or pick another port)");
  }
  return Status::Unavailable("cannot listen on " + Where(hp) + ": " + ec.message() +
                             " (give an address of this host, e.g. 127.0.0.1:PORT or 0.0.0.0:PORT)");
}

}  // namespace

struct PortMux::Pending {
  explicit Pending(tcp::socket s) : socket(std::move(s)), deadline(socket.get_executor()) {}
  tcp::socket socket;
  boost::asio::steady_timer deadline;
  std::array<char, kSniffBytes> in;
  std::string first;
  bool sniffing = true;  // counted in PortMux::sniffing_
};

Result<std::unique_ptr<PortMux>> PortMux::Bind(const HostPort& hp, std::chrono::milliseconds sniff_deadline) {
  std::unique_ptr<PortMux> mux(new PortMux());
  mux->sniff_deadline_ = sniff_deadline;
  std::string host = hp.host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  ListenAddress at{std::nullopt, static_cast<unsigned short>(hp.port)};
  const boost::asio::ip::address any = boost::asio::ip::make_address(host, ec);
  if (ec || !any.is_unspecified()) {
    // Not a wildcard (a wildcard takes IPv6 and IPv4 where the host has both).
    tcp::resolver resolver(mux->io_);
    const tcp::resolver::results_type found = resolver.resolve(host, std::to_string(hp.port), ec);
    if (ec || found.empty()) {
      return Status::Unavailable("cannot listen on " + Where(hp) + ": '" + host + "' does not resolve (" +
                                 ec.message() + "); give an address of this host, e.g. 0.0.0.0:PORT");
    }
    at.address = found.begin()->endpoint().address();
  }
  const Listening listening = ListenTcp(mux->acceptor_, at);
  if (listening.error) return CannotListen(hp, listening.error);
  mux->port_ = listening.port;
  return mux;
}

PortMux::~PortMux() { Stop(); }

void PortMux::Start(grpc::experimental::ExternalConnectionAcceptor* grpc, StoreHandler store) {
  grpc_ = grpc;
  store_ = std::move(store);
  accepting_.Start();
  thread_ = std::thread([this] { io_.run(); });
}

void PortMux::Stop() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

void PortMux::SetCloexecAndSniff(tcp::socket socket) {
  boost::system::error_code ignored;
  if (sniffing_ >= max_sniffing_) {
    ++refused_;
    ++unknown_logged_;
    const auto level = unknown_logged_ <= kMaxUnknownLogged ? spdlog::level::warn : spdlog::level::debug;
    const tcp::endpoint peer = socket.remote_endpoint(ignored);
    spdlog::log(level,
                "rendezvous port: refused a connection from {}: {} connections have not yet said what they "
                "speak, the limit; closed it",
                peer.address().to_string(), sniffing_);
    socket.close(ignored);
    return;
  }
  SetCloexec(socket.native_handle());
  ++sniffing_;
  auto p = std::make_shared<Pending>(std::move(socket));
  p->deadline.expires_after(sniff_deadline_);
  p->deadline.async_wait([this, p](const boost::system::error_code& ec) {
    if (!ec) Expire(p);
  });
  Sniff(p);
}

void PortMux::Expire(const std::shared_ptr<Pending>& p) {
  if (!p->socket.is_open()) return;  // handed on or closed already
  boost::system::error_code ignored;
  const tcp::endpoint peer = p->socket.remote_endpoint(ignored);
  ++silent_logged_;
  const auto level = silent_logged_ <= kMaxUnknownLogged ? spdlog::level::warn : spdlog::level::debug;
  spdlog::log(level,
              "rendezvous port: a connection from {} sent {} of the bytes that tell its protocol within {} ms; "
              "closed it{}",
              peer.address().to_string(), p->first.empty() ? "none" : "not enough", sniff_deadline_.count(),
              silent_logged_ == kMaxUnknownLogged ? " (further ones are logged at debug level)" : "");
  p->socket.close(ignored);  // the pending read ends with operation_aborted
}

void PortMux::Settle(Pending& p) {
  if (!p.sniffing) return;
  p.sniffing = false;
  --sniffing_;
}

void PortMux::Sniff(const std::shared_ptr<Pending>& p) {
  const size_t want = kSniffBytes - p->first.size();
  p->socket.async_read_some(boost::asio::buffer(p->in.data(), want),
                            [this, p](const boost::system::error_code& ec, size_t n) {
                              if (ec) {  // closed before it said anything (or expired): dropped
                                p->deadline.cancel();
                                Settle(*p);
                                return;
                              }
                              p->first.append(p->in.data(), n);
                              HandOff(p);
                            });
}

void PortMux::HandOff(const std::shared_ptr<Pending>& p) {
  const PortProtocol verdict = SniffPortProtocol(p->first);
  if (verdict == PortProtocol::kNeedMore) {
    Sniff(p);
    return;
  }
  p->deadline.cancel();
  Settle(*p);
  if (verdict == PortProtocol::kStore) {
    store_(std::move(p->socket), std::move(p->first));
    return;
  }
  if (verdict == PortProtocol::kGrpc) {
    // gRPC takes the descriptor over: its own, close-on-exec and
    // non-blocking, with the bytes already read.
    const int fd = p->socket.release();
    SetCloexec(fd);
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters params;
    params.listener_fd = acceptor_.native_handle();
    params.fd = fd;
    grpc::Slice bytes(p->first.data(), p->first.size());
    params.read_buffer = grpc::ByteBuffer(&bytes, 1);
    grpc_->HandleNewConnection(&params);
    return;
  }
  boost::system::error_code ignored;
  const tcp::endpoint peer = p->socket.remote_endpoint(ignored);
  ++unknown_logged_;
  const auto level = unknown_logged_ <= kMaxUnknownLogged ? spdlog::level::warn : spdlog::level::debug;
  spdlog::log(level,
              "rendezvous port: a connection from {} speaks neither gRPC nor the c10d store protocol "
              "(first byte 0x{:02x}); closed it",
              peer.address().to_string(), static_cast<unsigned char>(p->first[0]));
  p->socket.close(ignored);
}

}  // namespace ctrun::rdzv
