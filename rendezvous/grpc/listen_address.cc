#include "rendezvous/grpc/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ctrun::rdzv {

Result<HostPort> ParseListenAddress(const std::string& address) {
  const Status bad = Status::InvalidArgument("listen address '" + address +
                                             "': expected HOST:PORT with PORT in 0..65535, e.g. 0.0.0.0:29400");
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return bad;
  std::string host = address.substr(0, colon);
  if (host.find(':') != std::string::npos && !(host.front() == '[' && host.back() == ']')) return bad;
  int port = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    char c = address[i];
    if (c < '0' || c > '9' || port > 65535) return bad;
    port = port * 10 + (c - '0');
  }
  if (port > 65535) return bad;
  return HostPort{host, port};
}

std::string BindFailureReason(const HostPort& hp) {
  std::string host = hp.host;
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(hp.port);
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) return ::gai_strerror(rc);
  std::string reason = "the address is not available";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = ::bind(fd, ai->ai_addr, ai->ai_addrlen);
    int err = errno;
    ::close(fd);
    if (rc != 0) {
      reason = err == EADDRINUSE ? "address in use" : std::strerror(err);
      break;
    }
  }
  ::freeaddrinfo(found);
  return reason;
}

}  // namespace ctrun::rdzv
