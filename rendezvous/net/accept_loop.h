// AcceptLoop: keeps an Asio acceptor accepting, and waits out a failed
// accept. The connection a failed accept left (out of descriptors: EMFILE,
// ENFILE) stays in the kernel's queue, so accepting again at once would fail
// again at once: a busy loop. The loop waits 50 ms instead, and warns once
// a burst, naming what cannot accept. Used by the workers' store, the
// rendezvous port (rendezvous/grpc/net/port_mux.h) and the metrics endpoint.
//
// Runs on the acceptor's io_context; not thread-safe. The owner closes the
// acceptor and calls Stop() before destroying the loop, on that thread.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <string>

namespace ctrun::rdzv {

class AcceptLoop {
 public:
  using OnSocket = std::function<void(boost::asio::ip::tcp::socket)>;

  // `what` names the server in the warning ("the workers' store");
  // `on_socket` gets each accepted connection. `acceptor` outlives the loop.
  AcceptLoop(boost::asio::ip::tcp::acceptor& acceptor, std::string what, OnSocket on_socket);
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;

  // Accepts until the acceptor is closed (it must be open and listening).
  void Start();
  // Cancels a pending retry.
  void Stop();

 private:
  void Accept();

  boost::asio::ip::tcp::acceptor& acceptor_;
  boost::asio::steady_timer retry_;
  std::string what_;
  OnSocket on_socket_;
  bool failing_ = false;
};

}  // namespace ctrun::rdzv
