#include "rendezvous/grpc/net/port_sniff.h"

#include <algorithm>

namespace ctrun::rdzv {

namespace {

constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr unsigned char kTlsHandshake = 0x16;
constexpr unsigned char kTlsMajorVersion = 0x03;

}  // namespace

PortProtocol SniffPortProtocol(std::string_view first) {
  if (first.empty()) return PortProtocol::kNeedMore;
  const auto lead = static_cast<unsigned char>(first[0]);
  if (lead == static_cast<unsigned char>(kHttp2Preface[0])) {
    const size_t n = std::min(first.size(), kHttp2Preface.size());
    return first.substr(0, n) == kHttp2Preface.substr(0, n) ? PortProtocol::kGrpc : PortProtocol::kUnknown;
  }
  if (lead == kTlsHandshake) {
    if (first.size() >= 2 && static_cast<unsigned char>(first[1]) != kTlsMajorVersion) return PortProtocol::kUnknown;
    return PortProtocol::kGrpc;
  }
  if (lead <= kMaxStoreFirstByte) return PortProtocol::kStore;
  return PortProtocol::kUnknown;
}

std::string_view PortProtocolName(PortProtocol p) {
  switch (p) {
    case PortProtocol::kNeedMore: return "nothing yet";
    case PortProtocol::kGrpc: return "gRPC";
    case PortProtocol::kStore: return "c10d store";
    case PortProtocol::kUnknown: return "unknown";
  }
  return "unknown";
}

}  // namespace ctrun::rdzv
