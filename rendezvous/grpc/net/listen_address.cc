#include "rendezvous/grpc/net/listen_address.h"

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

}  // namespace ctrun::rdzv
