#include "rendezvous/net/accept_loop.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace ctrun::rdzv {

AcceptLoop::AcceptLoop(boost::asio::ip::tcp::acceptor& acceptor, std::string what, OnSocket on_socket)
    : acceptor_(acceptor), retry_(acceptor.get_executor()), what_(std::move(what)),
      on_socket_(std::move(on_socket)) {}

void AcceptLoop::Start() { Accept(); }

void AcceptLoop::Stop() { retry_.cancel(); }

void AcceptLoop::Accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket) {
    if (ec == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      failing_ = false;
      on_socket_(std::move(socket));
      Accept();
      return;
    }
    if (!failing_) {
      spdlog::warn("{} cannot accept a connection: {} (retrying every 50 ms; raise the open-files limit, "
                   "ulimit -n, if this is EMFILE)",
                   what_, ec.message());
    }
    failing_ = true;
    retry_.expires_after(std::chrono::milliseconds(50));
    retry_.async_wait([this](const boost::system::error_code& wait_ec) {
      if (!wait_ec && acceptor_.is_open()) Accept();
    });
  });
}

}  // namespace ctrun::rdzv
