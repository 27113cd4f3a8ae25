// HealServer: a worker's healing server, kept for the worker's life. It
// offers this worker's state (an opaque byte string: another layer
// serialises parameters, optimizer state, step, sampler and RNG) to the
// workers of behind replica groups, which fetch it with FetchHealState
// (heal_fetch.h) over the wire in heal_wire.h (docs/fault-tolerance.md,
// "Healing"). Pure C++/POSIX (Linux): no torch.
//
// A request names a quorum id and a step. Against the current offer it is
//   - served when both match: the reply header, then the state in chunks;
//   - held when there is no offer, or the request's quorum is newer than the
//     offer's (quorum ids only grow): a fetcher may arrive before this
//     worker got its own quorum answer and offered. It is served as soon as
//     a matching Offer arrives, refused if a non-matching one does, and
//     refused ("offered nothing ...") after kHealHoldTimeout;
//   - refused at once otherwise (an older quorum, or another step of the
//     same quorum), with a one-line reason naming both.
// A request that is not a heal request (magic, version) is refused with a
// one-line reason and closed. At most kHealMaxConnections connections are
// open at once; a further one gets a one-line refusal ("busy") and is
// closed, so its fetcher moves to its next source. A connection that makes
// no progress (no byte read or written) for kHealIdleTimeout is closed; a
// held one counts from the moment it is held. A fetcher that closes its
// connection early costs nothing but that connection.
//
// Memory: a served connection shares the offer's state (shared_ptr), so
// Offer or Withdraw during a transfer does not cut it short; the server
// never copies the state and allocates nothing a peer's bytes size.
//
// Threads: Listen starts one server thread that does all socket work;
// Offer, Withdraw, port and waiting may be called from any thread. The
// destructor stops the thread and closes every connection (a transfer in
// flight is cut: its fetcher sees the close).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/result.h"

namespace ctrun::trainer::ft {

inline constexpr std::size_t kHealMaxConnections = 4;
inline constexpr std::chrono::seconds kHealIdleTimeout{30};
inline constexpr std::chrono::seconds kHealHoldTimeout{30};

class HealServer {
 public:
  // Listens at port 0 on `host` (numeric IPv4 or IPv6) and serves on its own
  // thread. InvalidArgument for a host that is not numeric, IOError when it
  // cannot bind.
  static Result<std::unique_ptr<HealServer>> Listen(const std::string& host);
  // Called on the server's thread before each piece of a state it sends
  // (the reply's header is out by then), with the offer's step and the
  // state's bytes sent so far on that connection (0 first): the fault tests
  // kill the process there, mid-transfer (fault_point.h, CTRUN_FT_FAULT's
  // `serve`). Must not call into the server.
  using SendHook = std::function<void(int64_t step, std::size_t state_bytes_sent)>;
  static Result<std::unique_ptr<HealServer>> Listen(const std::string& host, SendHook on_send);
  ~HealServer();  // stops the thread, closes every connection
  HealServer(const HealServer&) = delete;
  HealServer& operator=(const HealServer&) = delete;

  uint16_t port() const { return port_; }

  // Offers `state` as this worker's state before step `step` of quorum
  // `quorum_id`; replaces the previous offer (transfers in flight keep the
  // state they started with). Held requests are decided against it at once.
  void Offer(int64_t quorum_id, int64_t step, std::shared_ptr<const std::string> state);
  // No offer: new requests are held.
  void Withdraw();

  // The number of requests held for an offer now (for tests and logs).
  std::size_t waiting() const;

  struct Offered {
    int64_t quorum_id = 0;
    int64_t step = 0;
    std::shared_ptr<const std::string> state;
  };

 private:
  HealServer(int listen_fd, int wake_fd, uint16_t port, SendHook on_send);
  void Run();
  void Wake();

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: readable = the offer changed, or stop
  uint16_t port_ = 0;
  const SendHook on_send_;  // may be empty; fixed at Listen
  mutable std::mutex mu_;
  std::optional<Offered> offer_;  // mu_
  uint64_t offer_version_ = 0;    // mu_: bumped by Offer and Withdraw
  bool stopping_ = false;         // mu_
  std::size_t waiting_ = 0;       // mu_
  std::thread thread_;
};

}  // namespace ctrun::trainer::ft
