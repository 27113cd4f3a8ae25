// ListenTcp: opens, binds and listens one Asio acceptor the way every
// listening socket of the rendezvous side does (the workers' store, the
// rendezvous port of rendezvous/grpc/net/port_mux.h, the metrics endpoint):
// close-on-exec, so that workers and other children never inherit it;
// SO_REUSEADDR (never SO_REUSEPORT: a second server on the port must fail to
// bind, and an agent relies on that to become a client of the first); and,
// for "every address of the host", one IPv6 socket that takes IPv4 too where
// the host has IPv6, else an IPv4 one.
//
// Plain functions, no state; call them on the acceptor's thread.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <optional>

namespace ctrun::rdzv {

// Where ListenTcp listens.
struct ListenAddress {
  // nullopt: every address of the host (IPv6 and IPv4 on one socket where
  // the host has IPv6, else IPv4 only). An address, the wildcard 0.0.0.0 or
  // :: included, is that address only, in its own family.
  std::optional<boost::asio::ip::address> address;
  unsigned short port = 0;  // 0: one the kernel picks
};

// What ListenTcp did: `error` is empty and `port` the bound port when the
// acceptor listens.
struct Listening {
  boost::system::error_code error;
  int port = 0;
};

// Opens the closed `acceptor` on `at`, close-on-exec, with SO_REUSEADDR,
// binds, listens and reads the bound port back. On error the acceptor is
// closed again and `error` holds the failing call's error (e.g.
// boost::asio::error::address_in_use when another socket holds the port);
// the caller words the message.
Listening ListenTcp(boost::asio::ip::tcp::acceptor& acceptor, const ListenAddress& at);

// Sets FD_CLOEXEC on `fd` (an accepted socket, say); errors are ignored.
void SetCloexec(int fd);

}  // namespace ctrun::rdzv
