// PortMux: the rendezvous port, shared by the agents' gRPC and the workers'
// c10d store (one port per job, as torchrun 2.5+ where MASTER_PORT is the
// rendezvous port).
//
// It owns the listening socket and accepts every connection itself, reads
// until its first bytes tell what it speaks (port_sniff.h), and hands it on
// with those bytes: gRPC connections (plaintext or TLS) to the gRPC server
// through its external-connection acceptor (the server then does the
// handshake and sees the client's real address), store connections to the
// store handler on the mux's own thread, anything else is closed. Nothing
// is proxied: after the hand-over, bytes flow between the client and their
// server directly.
//
// A connection that has not said what it speaks within the sniff deadline
// (10 s by default) is closed, and at most kMaxSniffing connections wait for
// their verdict at once (one over that is closed at accept, with a warning
// line): silent connections cannot pile up. The deadline is Bind's
// argument (ServerOptions::port_sniff_deadline: the launcher and ctrund read
// the test knob CTRUN_PORT_SNIFF_DEADLINE_MS into it); tests may shorten it
// with set_sniff_deadline too.
//
// Thread model: Bind on any thread; Start once; the store handler and the
// work posted to io() run on the mux's one thread. Stop (or the destructor)
// joins it; call it from another thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/result.h"
#include "rendezvous/grpc/net/listen_address.h"
#include "rendezvous/net/accept_loop.h"

namespace grpc::experimental {
class ExternalConnectionAcceptor;
}

namespace ctrun::rdzv {

class PortMux {
 public:
  // A store connection and the bytes already read from it.
  using StoreHandler = std::function<void(boost::asio::ip::tcp::socket socket, std::string first)>;

  // Binds and listens on `hp` (a wildcard host, 0.0.0.0 or ::, takes IPv6
  // and IPv4 where the host has both, as gRPC's own listener did). Errors:
  // Unavailable "cannot listen on HOST:PORT: address in use (...)" or the OS
  // or resolver reason.
  // `sniff_deadline`: see set_sniff_deadline.
  static Result<std::unique_ptr<PortMux>> Bind(const HostPort& hp,
                                               std::chrono::milliseconds sniff_deadline = kDefaultSniffDeadline);

  ~PortMux();
  PortMux(const PortMux&) = delete;
  PortMux& operator=(const PortMux&) = delete;

  int port() const { return port_; }

  static constexpr std::chrono::milliseconds kDefaultSniffDeadline{10'000};

  // How long a new connection may take to send the bytes that tell what it
  // speaks before it is closed. Call before Start. Bind sets it to its
  // argument (kDefaultSniffDeadline unless given).
  void set_sniff_deadline(std::chrono::milliseconds d) { sniff_deadline_ = d; }
  std::chrono::milliseconds sniff_deadline() const { return sniff_deadline_; }

  // Connections waiting for a verdict at once; more are closed at accept.
  // A gRPC client's first bytes come with its connection, so a storm of
  // thousands of agents stays far below it. Tests lower it (before Start).
  static constexpr size_t kMaxSniffing = 4096;
  void set_max_sniffing(size_t n) { max_sniffing_ = n; }
  // Connections closed at accept for kMaxSniffing (mux thread; for tests
  // after Stop).
  size_t refused() const { return refused_; }

  // The mux's io_context: a store connection handed to StoreHandler runs on
  // it, and so must everything that serves one.
  boost::asio::io_context& io() { return io_; }

  // Starts accepting on the mux's thread. `grpc` must outlive Stop().
  void Start(grpc::experimental::ExternalConnectionAcceptor* grpc, StoreHandler store);

  // Stops accepting and joins the thread; connections not yet handed on are
  // closed when the mux is destroyed. Idempotent.
  void Stop();

 private:
  struct Pending;
  PortMux() = default;
  void SetCloexecAndSniff(boost::asio::ip::tcp::socket socket);
  void Sniff(const std::shared_ptr<Pending>& p);
  void HandOff(const std::shared_ptr<Pending>& p);
  // The deadline ran out before a verdict: closes the connection.
  void Expire(const std::shared_ptr<Pending>& p);
  // p has its verdict (or is gone): it no longer counts as sniffing.
  void Settle(Pending& p);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  AcceptLoop accepting_{acceptor_, "the rendezvous port", [this](boost::asio::ip::tcp::socket socket) {
    SetCloexecAndSniff(std::move(socket));
  }};
  int port_ = 0;
  grpc::experimental::ExternalConnectionAcceptor* grpc_ = nullptr;
  StoreHandler store_;
  std::thread thread_;
  std::chrono::milliseconds sniff_deadline_ = kDefaultSniffDeadline;
  int unknown_logged_ = 0;  // mux thread only
  int silent_logged_ = 0;   // mux thread only
  size_t max_sniffing_ = kMaxSniffing;
  size_t sniffing_ = 0;     // mux thread only
  size_t refused_ = 0;      // mux thread only
};

}  // namespace ctrun::rdzv
