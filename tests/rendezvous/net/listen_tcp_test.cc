// ListenTcp and AcceptLoop over real sockets on this host's loopback: a
// listener on port 0 is bound, listening and close-on-exec, and its port
// reads back; "every address" takes an IPv4 connection on an IPv6 socket
// where the host has IPv6; a taken port is address_in_use with the acceptor
// closed again; the accept loop hands each connection over. Every connect
// is to a socket already listening; nothing sleeps.
#include <fcntl.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <vector>

#include "rendezvous/net/accept_loop.h"
#include "rendezvous/net/listen_tcp.h"

namespace ctrun::rdzv {
namespace {

using boost::asio::ip::tcp;

bool Cloexec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  return flags >= 0 && (flags & FD_CLOEXEC) != 0;
}

const boost::asio::ip::address kLoopback4 = boost::asio::ip::make_address("127.0.0.1");

TEST_CASE("ListenTcp on port 0 listens close-on-exec, and the port reads back") {
  boost::asio::io_context io;
  tcp::acceptor acceptor(io);
  const Listening listening = ListenTcp(acceptor, {kLoopback4, 0});
  REQUIRE_FALSE(listening.error);
  REQUIRE(acceptor.is_open());
  CHECK(listening.port > 0);
  CHECK(acceptor.local_endpoint().port() == listening.port);
  CHECK(acceptor.local_endpoint().address() == kLoopback4);
  CHECK(Cloexec(acceptor.native_handle()));

  tcp::socket client(io);
  client.connect(tcp::endpoint(kLoopback4, static_cast<unsigned short>(listening.port)));
  tcp::socket served = acceptor.accept();
  CHECK(served.remote_endpoint().port() == client.local_endpoint().port());
}

TEST_CASE("ListenTcp on every address takes an IPv4 connection, on IPv6 where the host has it") {
  boost::asio::io_context io;
  tcp::acceptor acceptor(io);
  const Listening listening = ListenTcp(acceptor, {std::nullopt, 0});
  REQUIRE_FALSE(listening.error);
  CHECK(Cloexec(acceptor.native_handle()));
  CHECK(acceptor.local_endpoint().port() == listening.port);
  CHECK(acceptor.local_endpoint().address().is_unspecified());

  tcp::socket client(io);
  client.connect(tcp::endpoint(kLoopback4, static_cast<unsigned short>(listening.port)));
  tcp::socket served = acceptor.accept();
  const boost::asio::ip::address peer = served.remote_endpoint().address();
  if (acceptor.local_endpoint().protocol() == tcp::v6()) {
    // Dual-stack: the IPv4 client shows as an IPv4-mapped IPv6 address.
    REQUIRE(peer.is_v6());
    CHECK(peer.to_v6().is_v4_mapped());
  } else {
    CHECK(peer == kLoopback4);  // no IPv6 on this host: the IPv4 fallback
  }
}

TEST_CASE("ListenTcp on a port another socket listens on is address_in_use, the acceptor closed") {
  boost::asio::io_context io;
  tcp::acceptor first(io);
  const Listening held = ListenTcp(first, {kLoopback4, 0});
  REQUIRE_FALSE(held.error);

  tcp::acceptor second(io);
  const Listening taken = ListenTcp(second, {kLoopback4, static_cast<unsigned short>(held.port)});
  CHECK(taken.error == boost::asio::error::address_in_use);
  CHECK(taken.port == 0);
  CHECK_FALSE(second.is_open());
}

TEST_CASE("SetCloexec sets FD_CLOEXEC") {
  boost::asio::io_context io;
  tcp::socket s(io, tcp::v4());
  const int fd = s.native_handle();
  ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) & ~FD_CLOEXEC);
  REQUIRE_FALSE(Cloexec(fd));
  SetCloexec(fd);
  CHECK(Cloexec(fd));
}

TEST_CASE("AcceptLoop hands every accepted connection over until the acceptor closes") {
  boost::asio::io_context io;
  tcp::acceptor acceptor(io);
  const Listening listening = ListenTcp(acceptor, {kLoopback4, 0});
  REQUIRE_FALSE(listening.error);
  std::vector<tcp::socket> accepted;
  AcceptLoop loop(acceptor, "the test's port", [&](tcp::socket s) { accepted.push_back(std::move(s)); });
  loop.Start();

  const tcp::endpoint to(kLoopback4, static_cast<unsigned short>(listening.port));
  tcp::socket a(io), b(io);
  a.connect(to);
  b.connect(to);
  while (accepted.size() < 2) REQUIRE(io.run_one() > 0);
  CHECK(accepted[0].remote_endpoint().port() == a.local_endpoint().port());
  CHECK(accepted[1].remote_endpoint().port() == b.local_endpoint().port());

  // Closing the acceptor ends the loop: the pending accept completes aborted
  // and nothing is re-armed, so the io_context runs out of work.
  loop.Stop();
  acceptor.close();
  io.run();
  CHECK(accepted.size() == 2);
}

}  // namespace
}  // namespace ctrun::rdzv
