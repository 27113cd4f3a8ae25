// AbortableRing's set-up (abortable_ring.h): connecting to the right
// neighbour, accepting the left one, and the handshake both ends check.
#include "trainer/comm/abortable_ring.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "trainer/comm/ring_wire.h"

namespace ctrun::trainer {
namespace {

RingHello RingHelloOf(const RingOptions& options, int rank) {
  return RingHello{options.ring_id, static_cast<std::uint32_t>(options.size), static_cast<std::uint32_t>(rank)};
}

}  // namespace

Status AbortableRing::Configure(std::uint64_t ring_id, int rank, int size) {
  if (state_ != State::kListening || aborted_.load()) {
    return Status::FailedPrecondition(Prefix() + "Configure called after Connect, a failure or Abort");
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return Status::InvalidArgument(Prefix() + "cannot configure rank " + std::to_string(rank) + " of " +
                                   std::to_string(size) + " members: need 0 <= rank < size");
  }
  options_.ring_id = ring_id;
  options_.rank = rank;
  options_.size = size;
  scratch_.resize(size > 1 ? options_.chunk_bytes / sizeof(float) : 0);
  return Status::Ok();
}

Status AbortableRing::Connect(const std::string& right_host, std::uint16_t right_port) {
  CTRUN_RETURN_IF_ERROR(Usable(State::kListening, "Connect"));
  if (options_.size > 1) {
    Status status = ConnectRight(right_host, right_port);
    if (status.ok()) status = AcceptLeft();
    if (status.ok()) status = Handshake();
    if (!status.ok()) return Fail(std::move(status));
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
  state_ = State::kConnected;
  return Status::Ok();
}

Status AbortableRing::ConnectRight(const std::string& host, std::uint16_t port) {
  right_name_ = "the right neighbour (rank " + std::to_string(right_rank()) + " at " + host + ":" +
                std::to_string(port) + ")";
  auto fd = RingStartConnect(host, port);
  if (!fd.ok()) return RingWithPrefix(Prefix() + "right neighbour: ", fd.status());
  right_fd_ = *fd;
  const std::string what = "while connecting to " + right_name_;
  const auto deadline = NextDeadline();
  pollfd fds[2] = {{abort_fd_, POLLIN, 0}, {right_fd_, POLLOUT, 0}};
  do {
    CTRUN_RETURN_IF_ERROR(WaitReady(fds, 2, what, deadline));
  } while (fds[1].revents == 0);
  const Status connected = RingConnectResult(right_fd_, right_name_);
  if (!connected.ok()) return RingWithPrefix(Prefix(), connected);
  RingSetNoDelay(right_fd_);
  const auto hello = EncodeRingHello(RingHelloOf(options_, options_.rank));
  Io io;
  io.what = "during the handshake";
  io.send_fd = right_fd_;
  io.send_who = &right_name_;
  io.send = hello.data();
  io.send_len = hello.size();
  return Move(io);
}

Status AbortableRing::AcceptLeft() {
  const std::string what = "while waiting for the left neighbour (rank " + std::to_string(left_rank()) +
                           ") to connect";
  const auto deadline = NextDeadline();
  pollfd fds[2] = {{abort_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
  for (;;) {
    CTRUN_RETURN_IF_ERROR(WaitReady(fds, 2, what, deadline));
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      left_fd_ = fd;
      break;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return Status::IOError(Prefix() + "cannot accept the left neighbour: " + std::strerror(errno));
    }
  }
  RingSetNoDelay(left_fd_);
  left_name_ = "the peer at " + RingPeerName(left_fd_);
  return Status::Ok();
}

Status AbortableRing::Handshake() {
  std::array<char, kRingHelloBytes> theirs{};
  Io in;
  in.what = "during the handshake";
  in.recv_fd = left_fd_;
  in.recv_who = &left_name_;
  in.recv = theirs.data();
  in.recv_len = theirs.size();
  CTRUN_RETURN_IF_ERROR(Move(in));
  const std::string peer = RingPeerName(left_fd_);
  CTRUN_RETURN_IF_ERROR(
      CheckRingHello(theirs, RingHelloOf(options_, left_rank()), Prefix() + "refused a connection from " + peer));
  left_name_ = "the left neighbour (rank " + std::to_string(left_rank()) + " at " + peer + ")";
  // Reply on the left connection while reading the right neighbour's reply.
  const auto mine = EncodeRingHello(RingHelloOf(options_, options_.rank));
  Io both;
  both.what = "during the handshake";
  both.send_fd = left_fd_;
  both.send_who = &left_name_;
  both.send = mine.data();
  both.send_len = mine.size();
  both.recv_fd = right_fd_;
  both.recv_who = &right_name_;
  both.recv = theirs.data();
  both.recv_len = theirs.size();
  CTRUN_RETURN_IF_ERROR(Move(both));
  return CheckRingHello(theirs, RingHelloOf(options_, right_rank()), Prefix() + "refused the reply of " + right_name_);
}

}  // namespace ctrun::trainer
