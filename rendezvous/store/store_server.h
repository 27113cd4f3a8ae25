// StoreServer: one c10d store for workers started with
// TORCHELASTIC_USE_AGENT_STORE=True. Serves PyTorch's TCPStore wire protocol
// (rendezvous/store/store_protocol.h) over TCP on an io_context, to
// connections it accepts on a port of its own (Listen: the agent's store
// when the rendezvous cannot serve it) or that it is handed (Adopt: the
// rendezvous port's PortMux, rendezvous/grpc/net/port_mux.h). The table and its
// waits are a StoreState.
//
// A connection whose bytes are malformed (or whose request the table refuses:
// GET of a missing key, ADD to a non-number, a MULTI_GET reply or MULTI_SET
// request over 64 MiB, kMaxStoreMultiReplyBytes) is closed and logged; the
// server and its other clients go on. The first 20 such refusals over the
// server's life are logged as warnings, later ones at debug level.
//
// Bounds, for clients that misbehave on purpose:
//  - back-pressure: a client whose unsent replies exceed UnsentLimit()
//    (the larger of 1 MiB and twice the largest value stored) is neither
//    served nor read from until they drain below it; its memory is then
//    bounded by that limit plus one reply;
//  - fairness: one turn of the loop serves at most kMaxRequestsPerTurn
//    requests or kMaxReplyBytesPerTurn bytes of replies of one connection,
//    then posts the rest behind the other connections' work (on ctrund every
//    run's store shares one loop);
//  - buffers over 1 MiB (the reply being built, a client's queue) are given
//    back once empty;
//  - connections: at most kMaxConnectionsPerAddress from one address and
//    kMaxConnections in all (tests lower them with set_connection_limits); one over either is closed at once, with a
//    warning line (counted with the refusals above), and the others go on.
//    A worker holds one or two connections for its whole run, so a node
//    of 64 workers stays far below the per-address limit.
//
// Ownership: `io` must outlive the server. The listening and accepted
// sockets are close-on-exec: workers never inherit them. Thread model:
// io_context thread only (no threads of its own).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "rendezvous/net/accept_loop.h"
#include "rendezvous/store/store_protocol.h"
#include "rendezvous/store/store_state.h"

namespace ctrun::rdzv {

class StoreServer {
 public:
  explicit StoreServer(boost::asio::io_context& io);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // Binds `host` (an address or a name resolved here; empty: every
  // interface, IPv6 and IPv4 where the host has both) on `port`, 0 meaning a
  // port the kernel picks, and starts accepting. Call once.
  // Errors: Unavailable when the port is taken ("address already in use"),
  // InvalidArgument when `host` does not resolve, IOError for any other
  // socket error; the message names the address and port.
  Status Listen(const std::string& host, int port);

  // Serves a connection accepted elsewhere; `first` holds the bytes already
  // read from it (they are the start of its first request). `socket` must
  // run on the server's io_context; call on that io_context's thread.
  void Adopt(boost::asio::ip::tcp::socket socket, std::string_view first);

  // The bound port; 0 before Listen succeeded.
  int port() const { return port_; }

  // Drops every key and wait and closes every client connection: the next
  // worker group starts from an empty store. The listening socket stays.
  void Clear();

  // Live client connections (for tests and logs).
  size_t connections() const { return sessions_.size(); }

  // The table and its waits (for tests).
  const StoreState& state() const { return state_; }
  // The most unsent reply bytes one client had queued at once (for tests).
  size_t peak_unsent() const { return peak_unsent_; }

  // Unsent reply bytes a client may have queued before the server stops
  // serving and reading it: max(kMinUnsentLimitBytes, 2 x the largest value
  // stored since the last Clear).
  size_t UnsentLimit() const;

  static constexpr size_t kMinUnsentLimitBytes = 1 << 20;
  static constexpr size_t kMaxRequestsPerTurn = 1024;
  static constexpr size_t kMaxReplyBytesPerTurn = 4 << 20;
  static constexpr size_t kMaxConnectionsPerAddress = 1024;
  // A job of 16,384 ranks whose workers hold two connections each (torch's
  // default process group's store and one of the worker's own) fits; the
  // process's open-files limit bounds it too (ctrun and ctrund raise their
  // soft limit to the hard one: base/open_files.h).
  static constexpr size_t kMaxConnections = 32768;

  // The connections refused for a limit above since the server started.
  size_t connections_refused() const { return connections_refused_; }
  void set_connection_limits(size_t per_address, size_t total) {
    max_per_address_ = per_address;
    max_connections_ = total;
  }

 private:
  struct Session;
  // Serves what s's parser holds, then reads more unless it is held (back-
  // pressure), its turn was used up (a continuation is posted) or a read is
  // outstanding.
  void Serve(const std::shared_ptr<Session>& s);
  // The posted continuation of a turn that used up its budget.
  void Resume(const std::shared_ptr<Session>& s);
  void Read(const std::shared_ptr<Session>& s);
  void OnRead(const std::shared_ptr<Session>& s, const boost::system::error_code& ec, size_t n);
  // The peer closed (or the read failed): a refusal if a request was cut off.
  void OnPeerClosed(const std::shared_ptr<Session>& s);
  // Applies the complete requests buffered in `s`, appending the replies to
  // `reply` (sending it on every 64 KiB), until none is left, the client is
  // held or the turn's budget is spent; the first error (malformed bytes, or
  // a request the table refuses) stops it and is returned.
  Status ServeRequests(const std::shared_ptr<Session>& s, std::string& reply);
  // Answers every whole request in s's parser (its bytes fed or committed)
  // and sends the replies; false when the session was refused or closed.
  bool Consume(const std::shared_ptr<Session>& s);
  // Applies one request; waiters it wakes are told (this session's through
  // `reply`, others' queued to them).
  Status Apply(const std::shared_ptr<Session>& s, StoreRequest& req, std::string& reply);
  // Writes `bytes` to `s` now if it is not writing (a non-blocking write);
  // what that does not take is queued behind what `s` is writing, and
  // async_write sends it. Closes `s` when the write fails.
  // `more`, if any, follows `bytes` in the same write.
  void Send(const std::shared_ptr<Session>& s, std::string_view bytes, std::string_view more = {});
  void Flush(const std::shared_ptr<Session>& s);
  void Refuse(const std::shared_ptr<Session>& s, const Status& why);
  void Close(Session& s);
  // Whether one more connection from `addr` is within the limits; logs the
  // refusal when it is not.
  bool AdmitConnection(const std::string& addr);
  void Forget(Session& s);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  AcceptLoop accepting_;
  int port_ = 0;
  StoreState state_;
  std::unordered_map<StoreClientId, std::shared_ptr<Session>> sessions_;
  std::unordered_map<std::string, size_t> per_address_;  // live connections by peer address
  size_t connections_refused_ = 0;
  size_t max_per_address_ = kMaxConnectionsPerAddress;
  size_t max_connections_ = kMaxConnections;
  StoreClientId next_id_ = 1;
  std::vector<StoreClientId> woken_;  // reused across requests
  std::string reply_;                 // reused across reads
  size_t turn_sent_ = 0;              // reply bytes sent so far in this turn
  size_t peak_unsent_ = 0;
  int refusals_logged_ = 0;
};

}  // namespace ctrun::rdzv
