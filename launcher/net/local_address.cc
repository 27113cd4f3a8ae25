#include "launcher/net/local_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

namespace ctrun::launcher {

namespace {

std::string AddrString(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

bool IsLoopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  }
  return false;
}

std::set<std::string> InterfaceAddresses() {
  std::set<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (i->ifa_addr) out.insert(AddrString(i->ifa_addr));
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

bool IsLocalHost(const std::string& host) {
  if (host == "localhost" || host == HostName()) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
  const std::set<std::string> local = InterfaceAddresses();
  bool found = false;
  for (addrinfo* a = res; a && !found; a = a->ai_next) {
    found = IsLoopback(a->ai_addr) || local.count(AddrString(a->ai_addr)) > 0;
  }
  freeaddrinfo(res);
  return found;
}

Result<std::string> SourceAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Status::Unavailable("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::string out;
  std::string why = "no address";
  for (addrinfo* ai = found; ai != nullptr && out.empty(); ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      out = AddrString(reinterpret_cast<const sockaddr*>(&local));
    } else {
      why = std::strerror(errno);
    }
    ::close(fd);
  }
  freeaddrinfo(found);
  if (out.empty()) return Status::Unavailable("no route from this machine to '" + host + "': " + why);
  return out;
}

}  // namespace ctrun::launcher
