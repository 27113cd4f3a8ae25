// What a connection to the rendezvous port speaks, told from its first
// bytes. The port is shared (port_mux.h): gRPC for the agents, and PyTorch's
// TCPStore protocol for the workers' c10d store. Pure: bytes in, a verdict
// out.
//
// A gRPC client opens with the HTTP/2 client preface ("PRI * HTTP/2.0\r\n
// \r\nSM\r\n\r\n", first byte 'P' = 0x50) over plaintext, or with a TLS
// handshake record (0x16, then the protocol's major version 3) over TLS.
// A TCPStore client's first byte is a request type, a small integer: torch
// 1.13 sends 0..8 (SET .. DELETE_KEY), torch 2.x opens every connection with
// VALIDATE (0) and knows types up to 13 (PING) before its queue requests.
// So the first byte alone decides; the bytes after it that have arrived
// are only checked against the preface (or TLS version) they must start.
#pragma once

#include <string_view>

namespace ctrun::rdzv {

enum class PortProtocol {
  kNeedMore,  // nothing arrived yet
  kGrpc,      // HTTP/2 preface or TLS handshake: gRPC's
  kStore,     // a TCPStore request type: a worker's c10d store
  kUnknown,   // neither: close the connection
};

// The highest request type a TCPStore client may open a connection with.
inline constexpr unsigned char kMaxStoreFirstByte = 13;

// The verdict on the first bytes of a connection (`first` may be any
// prefix of what the client sent, one byte or more).
PortProtocol SniffPortProtocol(std::string_view first);

// "gRPC", "c10d store", ... for logs.
std::string_view PortProtocolName(PortProtocol p);

}  // namespace ctrun::rdzv
