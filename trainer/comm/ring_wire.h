// The wire format and socket set-up of AbortableRing (abortable_ring.h):
// the fixed-size handshake and per-operation header, and the non-blocking
// TCP sockets the ring waits on. Pure POSIX, no torch.
//
// Every message has a fixed size and no length field, so nothing a peer
// sends decides how much memory is allocated. Integers are big-endian.
//
// Handshake (kRingHelloBytes): magic "ctrnRING", version u32, size u32,
// rank u32, reserved u32 (0), ring id u64. Each member sends its own to its
// right neighbour on connecting, and to its left neighbour after accepting
// (the reply), so both ends check the other.
//
// Operation header (kRingOpBytes): sequence number u64 (0, 1, ... per ring),
// element count u64, operation u64 (RingReduceOp: what is reduced, and how).
// Sent to the right neighbour before each all-reduce, so members that
// disagree on the call fail with a message, not garbage.
//
// Free functions, no state; the file descriptors returned are the caller's
// to close.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace ctrun::trainer {

inline constexpr std::size_t kRingHelloBytes = 32;
inline constexpr std::size_t kRingOpBytes = 24;
inline constexpr std::uint32_t kRingProtocolVersion = 2;

struct RingHello {
  std::uint64_t ring_id = 0;
  std::uint32_t size = 0;
  std::uint32_t rank = 0;
};

std::array<char, kRingHelloBytes> EncodeRingHello(const RingHello& hello);

// Checks a received handshake against what this member expects of the peer
// (ring id, size, the peer's rank). OK, or a one-line InvalidArgument that
// starts with `who` (e.g. "refused a connection from 10.0.0.2:41234") and
// says which field differs.
Status CheckRingHello(const std::array<char, kRingHelloBytes>& bytes, const RingHello& expected,
                      const std::string& who);

// The element type and reduction of one all-reduce (wire values fixed).
enum class RingReduceOp : std::uint64_t {
  kSumFloat = 0,  // float32 sum, in the ring's order (abortable_ring.h)
  kSumInt64 = 1,  // int64 sum, modulo 2^64: exact, in any order
};

struct RingOpHeader {
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::uint64_t op = 0;  // RingReduceOp's value; a peer's is checked, not trusted
};

std::array<char, kRingOpBytes> EncodeRingOp(const RingOpHeader& op);
RingOpHeader DecodeRingOp(const std::array<char, kRingOpBytes>& bytes);

struct RingListener {
  int fd = -1;
  std::uint16_t port = 0;
};

// A non-blocking, close-on-exec TCP socket bound to `host` (a numeric IPv4 or
// IPv6 address) at port 0, listening; the port is read back from the bound
// socket. InvalidArgument for a host that is not numeric, IOError otherwise.
Result<RingListener> RingListen(const std::string& host);

// A non-blocking TCP socket whose connect to host:port (numeric, no name
// lookup, so nothing blocks) has started; it may still be in progress
// (wait for POLLOUT, then RingConnectResult). Unavailable when refused at once.
Result<int> RingStartConnect(const std::string& host, std::uint16_t port);

// After POLLOUT on a connecting socket: OK, or the connect's error.
Status RingConnectResult(int fd, const std::string& who);

// "ip:port" of the socket's peer, or "an unknown address".
std::string RingPeerName(int fd);

// The same code as `status` (InvalidArgument, Unavailable or IOError; any
// other becomes Internal), its message behind `prefix`.
Status RingWithPrefix(const std::string& prefix, const Status& status);

// TCP_NODELAY (chunks go out at once); failures are ignored.
void RingSetNoDelay(int fd);

}  // namespace ctrun::trainer
