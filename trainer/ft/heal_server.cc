#include "trainer/ft/heal_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <list>
#include <utility>
#include <vector>

#include "trainer/comm/ring_wire.h"
#include "trainer/ft/heal_wire.h"

namespace ctrun::trainer::ft {
namespace {

using HealClock = std::chrono::steady_clock;
constexpr std::size_t kHealSendChunk = std::size_t{1} << 20;

enum class HealPhase { kRequest, kHeld, kSending };

// One connection of the server thread.
struct HealConn {
  int fd = -1;
  HealPhase phase = HealPhase::kRequest;
  std::array<char, kHealRequestBytes> request{};
  std::size_t got = 0;
  HealRequest wanted;
  std::string head;                          // reply header (+ refusal reason)
  std::shared_ptr<const std::string> state;  // null for a refusal
  int64_t step = 0;                          // the offer's, when serving
  std::size_t sent = 0;                      // over head, then state
  HealClock::time_point deadline;
};

bool HealRetryable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

std::string HealWhat(int64_t quorum_id, int64_t step) {
  return "step " + std::to_string(step) + " of quorum " + std::to_string(quorum_id);
}

void HealStartRefusal(HealConn& c, std::string_view reason, HealClock::time_point now) {
  c.head = EncodeHealRefusal(reason);
  c.state.reset();
  c.sent = 0;
  c.phase = HealPhase::kSending;
  c.deadline = now + kHealIdleTimeout;
}

// Serves, holds or refuses c's request against the offer (see heal_server.h).
void HealDecide(HealConn& c, const std::optional<HealServer::Offered>& offer, HealClock::time_point now) {
  const HealRequest& r = c.wanted;
  if (!offer || r.quorum_id > offer->quorum_id) {
    if (c.phase != HealPhase::kHeld) {
      c.phase = HealPhase::kHeld;
      c.deadline = now + kHealHoldTimeout;
    }
    return;
  }
  if (r.quorum_id != offer->quorum_id || r.step != offer->step) {
    return HealStartRefusal(c, "this worker offers the state before " + HealWhat(offer->quorum_id, offer->step) +
                                   ", not before " + HealWhat(r.quorum_id, r.step), now);
  }
  const auto header = EncodeHealReply(HealReply{kHealState, offer->state ? offer->state->size() : 0});
  c.head.assign(header.data(), header.size());
  c.state = offer->state;
  c.step = offer->step;
  c.sent = 0;
  c.phase = HealPhase::kSending;
  c.deadline = now + kHealIdleTimeout;
}

// Reads the request; false when the connection is to be closed.
bool HealReadRequest(HealConn& c, const std::optional<HealServer::Offered>& offer, HealClock::time_point now) {
  const ssize_t n = ::recv(c.fd, c.request.data() + c.got, c.request.size() - c.got, MSG_DONTWAIT);
  if (n < 0 && HealRetryable(errno)) return true;
  if (n <= 0) return false;
  c.got += static_cast<std::size_t>(n);
  c.deadline = now + kHealIdleTimeout;
  if (c.got < c.request.size()) return true;
  auto decoded = DecodeHealRequest(c.request);
  if (!decoded.ok()) {
    HealStartRefusal(c, "refused: " + decoded.status().message(), now);
    return true;
  }
  c.wanted = *decoded;
  HealDecide(c, offer, now);
  return true;
}

// Sends the next piece; false when done or failed (close the connection).
bool HealSendSome(HealConn& c, HealClock::time_point now, const HealServer::SendHook& on_send) {
  const std::size_t state_size = c.state ? c.state->size() : 0;
  const char* from = nullptr;
  std::size_t left = 0;
  if (c.sent < c.head.size()) {
    from = c.head.data() + c.sent;
    left = c.head.size() - c.sent;
  } else {
    const std::size_t at = c.sent - c.head.size();
    from = c.state ? c.state->data() + at : nullptr;
    left = state_size - at;
    if (on_send && c.state && left > 0) on_send(c.step, at);
  }
  if (left == 0) return false;
  const ssize_t n = ::send(c.fd, from, std::min(left, kHealSendChunk), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0 && HealRetryable(errno)) return true;
  if (n <= 0) return false;
  c.sent += static_cast<std::size_t>(n);
  c.deadline = now + kHealIdleTimeout;
  return c.sent < c.head.size() + state_size;
}

// A held connection became readable: its fetcher closed it or sent more
// than its request. Either way it is closed.
bool HealHeldStillQuiet(const HealConn& c) {
  char byte = 0;
  const ssize_t n = ::recv(c.fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  return n < 0 && HealRetryable(errno);
}

// Accepts every pending connection; beyond kHealMaxConnections each gets a
// one-line refusal and is closed.
void HealAcceptAll(int listen_fd, std::list<HealConn>& conns, HealClock::time_point now) {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or an error of that one connection
    if (conns.size() >= kHealMaxConnections) {
      const std::string busy = EncodeHealRefusal("busy: this worker serves " + std::to_string(kHealMaxConnections) +
                                                 " healing connections already");
      // Read what has come of its request, so that the close is a FIN, not
      // a reset; the refusal is read before either.
      std::array<char, kHealRequestBytes> request{};
      (void)!::recv(fd, request.data(), request.size(), MSG_DONTWAIT);
      (void)!::send(fd, busy.data(), busy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      ::close(fd);
      continue;
    }
    HealConn c;
    c.fd = fd;
    c.deadline = now + kHealIdleTimeout;
    conns.push_back(std::move(c));
  }
}

// One poll timeout in ms until the earliest deadline (-1: none).
int HealPollTimeout(const std::list<HealConn>& conns, HealClock::time_point now) {
  if (conns.empty()) return -1;
  HealClock::time_point earliest = HealClock::time_point::max();
  for (const HealConn& c : conns) earliest = std::min(earliest, c.deadline);
  if (earliest <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(earliest - now).count();
  return static_cast<int>(std::min<decltype(ms)>(ms, INT_MAX));
}

// Expired connections: a held one is refused, any other closed.
void HealExpire(std::list<HealConn>& conns, HealClock::time_point now) {
  for (auto it = conns.begin(); it != conns.end();) {
    if (now < it->deadline) {
      ++it;
    } else if (it->phase == HealPhase::kHeld) {
      HealStartRefusal(*it, "this worker offered nothing before " + HealWhat(it->wanted.quorum_id, it->wanted.step) +
                                " within " + std::to_string(kHealHoldTimeout.count()) + " s", now);
      ++it;
    } else {
      ::close(it->fd);
      it = conns.erase(it);
    }
  }
}

// Handles a ready connection; false when it is to be closed.
bool HealStep(HealConn& c, short revents, const std::optional<HealServer::Offered>& offer,
              HealClock::time_point now, const HealServer::SendHook& on_send) {
  switch (c.phase) {
    case HealPhase::kRequest: return HealReadRequest(c, offer, now);
    case HealPhase::kHeld: return HealHeldStillQuiet(c);
    case HealPhase::kSending:
      if (revents & (POLLOUT | POLLERR | POLLHUP)) return HealSendSome(c, now, on_send);
      return true;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<HealServer>> HealServer::Listen(const std::string& host) { return Listen(host, nullptr); }

Result<std::unique_ptr<HealServer>> HealServer::Listen(const std::string& host, SendHook on_send) {
  auto listener = RingListen(host);
  if (!listener.ok()) return RingWithPrefix("heal server: ", listener.status());
  const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int err = errno;
    ::close(listener->fd);
    return Status::IOError(std::string("heal server: cannot create an eventfd: ") + std::strerror(err));
  }
  std::unique_ptr<HealServer> server(new HealServer(listener->fd, wake_fd, listener->port, std::move(on_send)));
  server->thread_ = std::thread([raw = server.get()] { raw->Run(); });
  return server;
}

HealServer::HealServer(int listen_fd, int wake_fd, uint16_t port, SendHook on_send)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port), on_send_(std::move(on_send)) {}

HealServer::~HealServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void HealServer::Offer(int64_t quorum_id, int64_t step, std::shared_ptr<const std::string> state) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    offer_ = Offered{quorum_id, step, std::move(state)};
    ++offer_version_;
  }
  Wake();
}

void HealServer::Withdraw() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    offer_.reset();
    ++offer_version_;
  }
  Wake();
}

std::size_t HealServer::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

void HealServer::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void HealServer::Run() {
  std::list<HealConn> conns;
  uint64_t decided_version = 0;
  std::vector<pollfd> fds;
  for (;;) {
    std::optional<Offered> offer;
    uint64_t version = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      offer = offer_;
      version = offer_version_;
    }
    auto now = HealClock::now();
    if (version != decided_version) {
      for (HealConn& c : conns) {
        if (c.phase == HealPhase::kHeld) HealDecide(c, offer, now);
      }
      decided_version = version;
    }
    HealExpire(conns, now);
    {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ = static_cast<std::size_t>(
          std::count_if(conns.begin(), conns.end(), [](const HealConn& c) { return c.phase == HealPhase::kHeld; }));
    }
    fds.assign({{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    for (const HealConn& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.phase == HealPhase::kSending ? POLLOUT : POLLIN), 0});
    }
    const int ready = ::poll(fds.data(), static_cast<nfds_t>(fds.size()), HealPollTimeout(conns, now));
    if (ready < 0 && errno != EINTR) break;  // cannot happen with valid descriptors; fail closed
    if (ready <= 0) continue;
    now = HealClock::now();
    if (fds[0].revents != 0) {
      uint64_t drained = 0;
      (void)!::read(wake_fd_, &drained, sizeof(drained));
    }
    std::size_t i = 2;
    for (auto it = conns.begin(); it != conns.end(); ++i) {
      if (fds[i].revents == 0 || HealStep(*it, fds[i].revents, offer, now, on_send_)) {
        ++it;
        continue;
      }
      ::close(it->fd);
      it = conns.erase(it);
    }
    if (fds[1].revents != 0) HealAcceptAll(listen_fd_, conns, now);
  }
  for (HealConn& c : conns) ::close(c.fd);
}

}  // namespace ctrun::trainer::ft
