#include "trainer/comm/ring_wire.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <utility>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ctrun::trainer {
namespace {

constexpr char kRingWireMagic[8] = {'c', 't', 'r', 'n', 'R', 'I', 'N', 'G'};

void RingPut(char* out, std::uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    out[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
}

std::uint64_t RingGet(const char* in, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<unsigned char>(in[i]);
  return value;
}

// getaddrinfo for a numeric host (never a name lookup, so it cannot block).
Result<addrinfo*> RingResolve(const std::string& host, std::uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    return Status::InvalidArgument("'" + host +
                                   "' is not a numeric IPv4 or IPv6 address (the ring looks no names up)");
  }
  return found;
}

std::string RingErrno(int err) { return std::strerror(err); }

}  // namespace

std::array<char, kRingHelloBytes> EncodeRingHello(const RingHello& hello) {
  std::array<char, kRingHelloBytes> out{};
  std::memcpy(out.data(), kRingWireMagic, sizeof(kRingWireMagic));
  RingPut(out.data() + 8, kRingProtocolVersion, 4);
  RingPut(out.data() + 12, hello.size, 4);
  RingPut(out.data() + 16, hello.rank, 4);
  RingPut(out.data() + 20, 0, 4);
  RingPut(out.data() + 24, hello.ring_id, 8);
  return out;
}

Status CheckRingHello(const std::array<char, kRingHelloBytes>& bytes, const RingHello& expected,
                      const std::string& who) {
  if (std::memcmp(bytes.data(), kRingWireMagic, sizeof(kRingWireMagic)) != 0) {
    return Status::InvalidArgument(who + ": its first bytes are not a ctrun ring handshake");
  }
  const std::uint64_t version = RingGet(bytes.data() + 8, 4);
  if (version != kRingProtocolVersion) {
    return Status::InvalidArgument(who + ": it speaks ring protocol version " + std::to_string(version) +
                                   ", this member version " + std::to_string(kRingProtocolVersion));
  }
  const std::uint64_t ring_id = RingGet(bytes.data() + 24, 8);
  if (ring_id != expected.ring_id) {
    return Status::InvalidArgument(who + ": it belongs to ring " + std::to_string(ring_id) +
                                   ", this member to ring " + std::to_string(expected.ring_id) +
                                   " (a member of another quorum?)");
  }
  const std::uint64_t size = RingGet(bytes.data() + 12, 4);
  if (size != expected.size) {
    return Status::InvalidArgument(who + ": it counts " + std::to_string(size) + " members, this member " +
                                   std::to_string(expected.size));
  }
  const std::uint64_t rank = RingGet(bytes.data() + 16, 4);
  if (rank != expected.rank) {
    return Status::InvalidArgument(who + ": it is rank " + std::to_string(rank) + ", expected rank " +
                                   std::to_string(expected.rank));
  }
  return Status::Ok();
}

std::array<char, kRingOpBytes> EncodeRingOp(const RingOpHeader& op) {
  std::array<char, kRingOpBytes> out{};
  RingPut(out.data(), op.seq, 8);
  RingPut(out.data() + 8, op.count, 8);
  RingPut(out.data() + 16, op.op, 8);
  return out;
}

RingOpHeader DecodeRingOp(const std::array<char, kRingOpBytes>& bytes) {
  return RingOpHeader{RingGet(bytes.data(), 8), RingGet(bytes.data() + 8, 8), RingGet(bytes.data() + 16, 8)};
}

Result<RingListener> RingListen(const std::string& host) {
  auto resolved = RingResolve(host, 0, /*passive=*/true);
  if (!resolved.ok()) return resolved.status();
  addrinfo* ai = *resolved;
  const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ::freeaddrinfo(ai);
    return Status::IOError("cannot create a listening socket: " + RingErrno(errno));
  }
  const bool bound = ::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 16) == 0;
  const int err = errno;
  ::freeaddrinfo(ai);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (!bound || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return Status::IOError("cannot listen on " + host + " port 0: " + RingErrno(bound ? errno : err));
  }
  const std::uint16_t port = addr.ss_family == AF_INET6
                                 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                 : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return RingListener{fd, port};
}

Result<int> RingStartConnect(const std::string& host, std::uint16_t port) {
  auto resolved = RingResolve(host, port, /*passive=*/false);
  if (!resolved.ok()) return resolved.status();
  addrinfo* ai = *resolved;
  const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int err = errno;
  if (fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
    err = errno;
    ::close(fd);
    ::freeaddrinfo(ai);
    return Status::Unavailable("cannot connect to " + host + ":" + std::to_string(port) + ": " + RingErrno(err));
  }
  ::freeaddrinfo(ai);
  if (fd < 0) return Status::IOError("cannot create a socket: " + RingErrno(err));
  return fd;
}

Status RingConnectResult(int fd, const std::string& who) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return Status::Unavailable("cannot connect to " + who + ": " + RingErrno(err));
  return Status::Ok();
}

std::string RingPeerName(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "an unknown address";
  char host[INET6_ADDRSTRLEN] = {};
  std::uint16_t port = 0;
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    std::string out(1, '[');
    out += host;
    out += "]:";
    out += std::to_string(port);
    return out;
  }
  const auto* in4 = reinterpret_cast<sockaddr_in*>(&addr);
  ::inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host));
  port = ntohs(in4->sin_port);
  return std::string(host) + ":" + std::to_string(port);
}

// The same code as `status`, its message behind `prefix`.
Status RingWithPrefix(const std::string& prefix, const Status& status) {
  std::string message = prefix + status.message();
  switch (status.code()) {
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(std::move(message));
    case Status::Code::kUnavailable: return Status::Unavailable(std::move(message));
    case Status::Code::kIOError: return Status::IOError(std::move(message));
    default: return Status::Internal(std::move(message));
  }
}

void RingSetNoDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace ctrun::trainer
