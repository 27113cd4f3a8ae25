#include "rendezvous/grpc/net/port_sniff.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "rendezvous/store/store_protocol.h"

namespace ctrun::rdzv {
namespace {

std::string Bytes(std::initializer_list<uint8_t> b) { return std::string(b.begin(), b.end()); }

TEST_CASE("nothing read yet needs more bytes") { CHECK(SniffPortProtocol("") == PortProtocol::kNeedMore); }

TEST_CASE("the HTTP/2 client preface is gRPC, from its first byte on") {
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  for (size_t n = 1; n <= preface.size(); ++n) {
    INFO(n);
    CHECK(SniffPortProtocol(preface.substr(0, n)) == PortProtocol::kGrpc);
  }
  CHECK(SniffPortProtocol(preface + "\x00\x00\x12\x04") == PortProtocol::kGrpc);
}

TEST_CASE("a 'P' that does not go on as the preface is refused (HTTP/1 POST, PUT)") {
  CHECK(SniffPortProtocol("POST / HTTP/1.1\r\n") == PortProtocol::kUnknown);
  CHECK(SniffPortProtocol("PUT") == PortProtocol::kUnknown);
  CHECK(SniffPortProtocol("PRI * HTTP/1.1") == PortProtocol::kUnknown);
}

TEST_CASE("a TLS handshake record is gRPC over TLS, another version byte is refused") {
  CHECK(SniffPortProtocol(Bytes({0x16})) == PortProtocol::kGrpc);
  CHECK(SniffPortProtocol(Bytes({0x16, 0x03, 0x01, 0x02, 0x00})) == PortProtocol::kGrpc);
  CHECK(SniffPortProtocol(Bytes({0x16, 0x02})) == PortProtocol::kUnknown);
}

TEST_CASE("torch 2.x's first request, VALIDATE with its magic, is the store") {
  std::string validate = Bytes({0x00});
  const uint32_t magic = kStoreValidateMagic;
  validate.append(reinterpret_cast<const char*>(&magic), sizeof(magic));
  CHECK(SniffPortProtocol(validate) == PortProtocol::kStore);
  CHECK(SniffPortProtocol(validate.substr(0, 1)) == PortProtocol::kStore);
}

TEST_CASE("every torch 1.13 and 2.x request type opens a store connection, the next byte up does not") {
  for (unsigned type = 0; type <= kMaxStoreFirstByte; ++type) {
    INFO(type);
    CHECK(SniffPortProtocol(Bytes({static_cast<uint8_t>(type), 0x05, 0x00})) == PortProtocol::kStore);
  }
  CHECK(SniffPortProtocol(Bytes({kMaxStoreFirstByte + 1})) == PortProtocol::kUnknown);
}

TEST_CASE("other first bytes are refused: HTTP/1 GET, SSH, high bytes") {
  CHECK(SniffPortProtocol("GET /metrics HTTP/1.1\r\n") == PortProtocol::kUnknown);
  CHECK(SniffPortProtocol("SSH-2.0-OpenSSH") == PortProtocol::kUnknown);
  CHECK(SniffPortProtocol(Bytes({0xff})) == PortProtocol::kUnknown);
}

}  // namespace
}  // namespace ctrun::rdzv
