#include "base/ft_wire/host_port.h"

#include <limits>

#include "base/ft_wire/fields.h"

namespace ctrun::ft_wire {

std::string FormatHostPort(std::string_view host, uint16_t port) {
  return std::string(host) + ":" + std::to_string(port);
}

Result<HostPort> ParseHostPort(std::string_view text, std::string_view what) {
  const std::size_t colon = text.rfind(':');
  const std::string bad = std::string(what) + " " + Excerpt(text) + " is not host:port";
  if (colon == std::string_view::npos || colon == 0) return Status::InvalidArgument(bad);
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  uint32_t port = 0;
  if (host.empty() || host.find_first_of("[], ") != std::string_view::npos ||
      !ParseWhole(text.substr(colon + 1), port) || port == 0 || port > std::numeric_limits<uint16_t>::max()) {
    return Status::InvalidArgument(bad);
  }
  return HostPort{std::string(host), static_cast<uint16_t>(port)};
}

}  // namespace ctrun::ft_wire
