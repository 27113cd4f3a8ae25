#include "rendezvous/net/listen_tcp.h"

#include <fcntl.h>

#include <boost/asio/ip/v6_only.hpp>

namespace ctrun::rdzv {

namespace {

using boost::asio::ip::tcp;

// Opens `acceptor` for `at`; returns the endpoint to bind.
tcp::endpoint Open(tcp::acceptor& acceptor, const ListenAddress& at, boost::system::error_code& ec) {
  if (at.address) {
    const tcp::endpoint ep(*at.address, at.port);
    acceptor.open(ep.protocol(), ec);
    return ep;
  }
  acceptor.open(tcp::v6(), ec);
  if (!ec) acceptor.set_option(boost::asio::ip::v6_only(false), ec);
  if (!ec) return tcp::endpoint(tcp::v6(), at.port);
  // No IPv6 on this host.
  boost::system::error_code ignored;
  acceptor.close(ignored);
  ec.clear();
  acceptor.open(tcp::v4(), ec);
  return tcp::endpoint(tcp::v4(), at.port);
}

}  // namespace

void SetCloexec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

Listening ListenTcp(tcp::acceptor& acceptor, const ListenAddress& at) {
  Listening out;
  boost::system::error_code& ec = out.error;
  const tcp::endpoint ep = Open(acceptor, at, ec);
  if (!ec) {
    SetCloexec(acceptor.native_handle());
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  }
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (!ec) out.port = acceptor.local_endpoint(ec).port();
  if (ec) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    out.port = 0;
  }
  return out;
}

}  // namespace ctrun::rdzv
