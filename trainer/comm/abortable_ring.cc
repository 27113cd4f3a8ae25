#include "trainer/comm/abortable_ring.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "trainer/comm/ring_wire.h"

namespace ctrun::trainer {
namespace {

using RingClock = std::chrono::steady_clock;

constexpr std::size_t kRingMaxChunkBytes = std::size_t{64} << 20;
// Abort() is async-signal-safe only if its flag needs no lock.
static_assert(std::atomic<bool>::is_always_lock_free);

struct RingSegment {
  std::size_t offset = 0;
  std::size_t count = 0;
};

// Segment k of N over `count` elements: the first count % N are one longer.
RingSegment RingSegmentOf(std::size_t count, int n, int k) {
  const std::size_t q = count / static_cast<std::size_t>(n);
  const std::size_t r = count % static_cast<std::size_t>(n);
  const std::size_t uk = static_cast<std::size_t>(k);
  return RingSegment{uk * q + std::min(uk, r), q + (uk < r ? 1 : 0)};
}

int RingMod(int value, int n) { return ((value % n) + n) % n; }

// Step t of 2(N-1): reduce-scatter for t < N-1, then all-gather. Member r
// sends segment (r - s) and adds into (r - s - 1) while reducing; then sends
// (r + 1 - s) and copies into (r - s). Returns {send segment, receive segment}.
std::pair<int, int> RingStepSegments(int rank, int n, int step) {
  if (step < n - 1) return {RingMod(rank - step, n), RingMod(rank - step - 1, n)};
  const int s = step - (n - 1);
  return {RingMod(rank + 1 - s, n), RingMod(rank - s, n)};
}

std::string RingOpName(std::uint64_t op) {
  switch (op) {
    case static_cast<std::uint64_t>(RingReduceOp::kSumFloat): return "float sum";
    case static_cast<std::uint64_t>(RingReduceOp::kSumInt64): return "int64 sum";
    default: return "unknown operation " + std::to_string(op);
  }
}

bool RingRetryable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

// "<who> closed the connection <what>" (err 0: end of stream; EPIPE, ECONNRESET),
// else "<who>: <error> <what>".
std::string RingPeerFailure(const std::string& who, int err, std::string_view what) {
  if (err == 0 || err == EPIPE || err == ECONNRESET) return who + " closed the connection " + std::string(what);
  return who + ": " + std::strerror(err) + " " + std::string(what);
}

}  // namespace

Result<std::unique_ptr<AbortableRing>> AbortableRing::Listen(RingOptions options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return Status::InvalidArgument("ring rank " + std::to_string(options.rank) + " of " +
                                   std::to_string(options.size) + " members: need 0 <= rank < size");
  }
  if (options.chunk_bytes < 4 || options.chunk_bytes > kRingMaxChunkBytes || options.chunk_bytes % 4 != 0) {
    return Status::InvalidArgument("ring chunk of " + std::to_string(options.chunk_bytes) +
                                   " bytes: need a multiple of 4 from 4 bytes to 64 MiB");
  }
  if (options.stall_timeout.count() < 0) return Status::InvalidArgument("ring stall timeout must not be negative");
  auto listener = RingListen(options.listen_host);
  if (!listener.ok()) return RingWithPrefix("ring: ", listener.status());
  std::unique_ptr<AbortableRing> ring(new AbortableRing(std::move(options)));
  ring->listen_fd_ = listener->fd;
  ring->port_ = listener->port;
  ring->abort_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ring->abort_fd_ < 0) return Status::IOError(ring->Prefix() + "cannot create an eventfd: " + std::strerror(errno));
  return ring;
}

AbortableRing::AbortableRing(RingOptions options) : options_(std::move(options)) {
  // Room for one reduce chunk of any element size (ReduceChunk).
  if (options_.size > 1) scratch_.resize((options_.chunk_bytes + 7) / 8);
}

AbortableRing::~AbortableRing() {
  CloseSockets();
  if (abort_fd_ >= 0) ::close(abort_fd_);
}

void AbortableRing::Abort() noexcept {
  const int saved_errno = errno;
  aborted_.store(true);
  const std::uint64_t one = 1;
  const ssize_t written = ::write(abort_fd_, &one, sizeof(one));
  (void)written;  // EAGAIN: the counter is already non-zero, which is all we need
  errno = saved_errno;
}

std::string AbortableRing::Prefix() const {
  return "ring " + std::to_string(options_.ring_id) + " rank " + std::to_string(options_.rank) + ": ";
}

Status AbortableRing::Usable(State wanted, std::string_view call) {
  if (state_ == State::kBroken) {
    return Status::FailedPrecondition(Prefix() + "unusable after an earlier failure (build a new ring): " +
                                      failure_.message());
  }
  if (aborted_.load()) return Fail(Status::Aborted(Prefix() + "aborted before " + std::string(call)));
  if (state_ != wanted) {
    return Status::FailedPrecondition(Prefix() + std::string(call) +
                                      (wanted == State::kListening ? " called twice" : " called before Connect"));
  }
  return Status::Ok();
}

Status AbortableRing::Fail(Status status) {
  state_ = State::kBroken;
  failure_ = status;
  CloseSockets();
  return status;
}

void AbortableRing::CloseSockets() {
  for (int* fd : {&listen_fd_, &left_fd_, &right_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

Status AbortableRing::AllReduceSum(float* data, std::size_t count) {
  return AllReduce(reinterpret_cast<char*>(data), count, RingReduceOp::kSumFloat, "AllReduceSum");
}

Status AbortableRing::AllReduceSum(std::int64_t* data, std::size_t count) {
  return AllReduce(reinterpret_cast<char*>(data), count, RingReduceOp::kSumInt64, "AllReduceSum");
}

std::size_t AbortableRing::ElementBytes() const { return op_ == RingReduceOp::kSumInt64 ? 8 : 4; }

std::size_t AbortableRing::ReduceChunk() const {
  const std::size_t element = ElementBytes();
  return std::max(element, options_.chunk_bytes - options_.chunk_bytes % element);
}

// The partial result of the members before this one (in scratch_), reduced
// into this member's `bytes` at `into`.
void AbortableRing::ReduceChunkInto(char* into, std::size_t bytes) {
  const char* theirs = reinterpret_cast<const char*>(scratch_.data());
  switch (op_) {
    case RingReduceOp::kSumFloat: {
      float* mine = reinterpret_cast<float*>(into);
      const float* add = reinterpret_cast<const float*>(theirs);
      for (std::size_t i = 0; i < bytes / 4; ++i) mine[i] += add[i];
      break;
    }
    case RingReduceOp::kSumInt64: {  // unsigned: wraps modulo 2^64, as documented
      std::uint64_t* mine = reinterpret_cast<std::uint64_t*>(into);
      const std::uint64_t* add = reinterpret_cast<const std::uint64_t*>(theirs);
      for (std::size_t i = 0; i < bytes / 8; ++i) mine[i] += add[i];
      break;
    }
  }
}

Status AbortableRing::AllReduce(char* data, std::size_t count, RingReduceOp op, std::string_view call) {
  CTRUN_RETURN_IF_ERROR(Usable(State::kConnected, call));
  op_ = op;
  const std::size_t element = ElementBytes();
  if (count > SIZE_MAX / element || (data == nullptr && count > 0)) {
    return Status::InvalidArgument(Prefix() + "all-reduce of " + std::to_string(count) +
                                   " elements: need a buffer of that many");
  }
  if (options_.size == 1) return Status::Ok();
  op_send_left_ = kRingOpBytes;
  for (int step = 0; step < 2 * (options_.size - 1); ++step) {
    const int send_seg = RingStepSegments(options_.rank, options_.size, step).first;
    op_send_left_ += RingSegmentOf(count, options_.size, send_seg).count * element;
  }
  Status status = ExchangeOpHeader(count);
  for (int step = 0; status.ok() && step < 2 * (options_.size - 1); ++step) status = Step(data, count, step);
  ++op_seq_;
  if (!status.ok()) return Fail(std::move(status));
  return Status::Ok();
}

Status AbortableRing::ExchangeOpHeader(std::size_t count) {
  const auto mine = EncodeRingOp(RingOpHeader{op_seq_, count, static_cast<std::uint64_t>(op_)});
  std::array<char, kRingOpBytes> theirs{};
  Io io;
  io.what = "starting all-reduce #" + std::to_string(op_seq_);
  io.send_fd = right_fd_;
  io.send_who = &right_name_;
  io.send = mine.data();
  io.send_len = mine.size();
  io.recv_fd = left_fd_;
  io.recv_who = &left_name_;
  io.recv = theirs.data();
  io.recv_len = theirs.size();
  io.quiet_peer = true;
  CTRUN_RETURN_IF_ERROR(Move(io));
  const RingOpHeader left = DecodeRingOp(theirs);
  const auto mine_op = static_cast<std::uint64_t>(op_);
  if (left.seq == op_seq_ && left.count == count && left.op == mine_op) return Status::Ok();
  return Status::InvalidArgument(Prefix() + left_name_ + " is at all-reduce #" + std::to_string(left.seq) + " (" +
                                 RingOpName(left.op) + ") of " + std::to_string(left.count) +
                                 " elements, this member at #" + std::to_string(op_seq_) + " (" +
                                 RingOpName(mine_op) + ") of " + std::to_string(count) +
                                 " (the members' calls differ)");
}

Status AbortableRing::Step(char* data, std::size_t count, int step) {
  const std::size_t element = ElementBytes();
  const int n = options_.size;
  const bool reduce = step < n - 1;
  const auto [send_seg, recv_seg] = RingStepSegments(options_.rank, n, step);
  const RingSegment out = RingSegmentOf(count, n, send_seg);
  const RingSegment in = RingSegmentOf(count, n, recv_seg);
  Io io;
  io.what = "during all-reduce #" + std::to_string(op_seq_) + " (" +
            (reduce ? "reduce-scatter step " + std::to_string(step + 1)
                    : "all-gather step " + std::to_string(step - n + 2)) +
            " of " + std::to_string(n - 1) + ")";
  io.send_fd = right_fd_;
  io.send_who = &right_name_;
  io.send = data + out.offset * element;
  io.send_len = out.count * element;
  io.recv_fd = left_fd_;
  io.recv_who = &left_name_;
  io.recv_len = in.count * element;
  if (reduce) {
    io.reduce_into = data + in.offset * element;
  } else {
    io.recv = data + in.offset * element;
  }
  io.quiet_peer = true;
  return Move(io);
}

Status AbortableRing::Move(const Io& io) {
  std::size_t sent = 0;
  std::size_t got = 0;
  auto deadline = NextDeadline();
  while (sent < io.send_len || got < io.recv_len) {
    const bool sending = sent < io.send_len;
    const bool watch = io.quiet_peer && op_send_left_ > 0;
    pollfd fds[3] = {{abort_fd_, POLLIN, 0}, {-1, 0, 0}, {-1, 0, 0}};
    if (sending || watch) {
      fds[1] = {io.send_fd, static_cast<short>((sending ? POLLOUT : 0) | (watch ? POLLIN : 0)), 0};
    }
    if (got < io.recv_len) fds[2] = {io.recv_fd, POLLIN, 0};
    CTRUN_RETURN_IF_ERROR(WaitReady(fds, 3, io.what, deadline));
    const std::size_t before = sent + got;
    // Data first: a peer that sent everything and then closed is no failure
    // of this transfer (a later one, or the op header check, reports it).
    if (fds[2].revents != 0) CTRUN_RETURN_IF_ERROR(ReceiveSome(io, got));
    if (sending && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) CTRUN_RETURN_IF_ERROR(SendSome(io, sent));
    const bool done = sent >= io.send_len && got >= io.recv_len;
    if (!done && watch && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
      CTRUN_RETURN_IF_ERROR(CheckQuiet(io.send_fd, *io.send_who, io.what));
    }
    if (sent + got != before) deadline = NextDeadline();
  }
  return Status::Ok();
}

Status AbortableRing::WaitReady(pollfd* fds, int n, std::string_view what, RingClock::time_point deadline) {
  if (options_.before_wait) options_.before_wait(what);
  for (;;) {
    int timeout_ms = -1;
    if (deadline != RingClock::time_point::max()) {
      const auto left = deadline - RingClock::now();
      if (left <= RingClock::duration::zero()) {
        return Status::DeadlineExceeded(Prefix() + "no progress for " +
                                        std::to_string(options_.stall_timeout.count()) + " ms " +
                                        std::string(what));
      }
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      timeout_ms = static_cast<int>(std::min<decltype(ms)>(ms, INT_MAX));
    }
    const int ready = ::poll(fds, static_cast<nfds_t>(n), timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Status::IOError(Prefix() + "poll failed " + std::string(what) + ": " + std::strerror(errno));
    if (fds[0].revents != 0 || aborted_.load()) return Status::Aborted(Prefix() + "aborted " + std::string(what));
    if (ready > 0) return Status::Ok();
  }
}

Status AbortableRing::CheckQuiet(int fd, const std::string& who, std::string_view what) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
  const int err = n < 0 ? errno : 0;
  if (n < 0 && RingRetryable(err)) return Status::Ok();
  if (n <= 0) return Status::Unavailable(Prefix() + RingPeerFailure(who, err, what));
  return Status::InvalidArgument(Prefix() + who + " sent data it should not have " + std::string(what));
}

Status AbortableRing::SendSome(const Io& io, std::size_t& sent) {
  const std::size_t want = std::min(options_.chunk_bytes, io.send_len - sent);
  const ssize_t n = ::send(io.send_fd, io.send + sent, want, MSG_DONTWAIT | MSG_NOSIGNAL);
  const int err = n < 0 ? errno : 0;
  if (n < 0 && RingRetryable(err)) return Status::Ok();
  if (n < 0) return Status::Unavailable(Prefix() + RingPeerFailure(*io.send_who, err, io.what));
  sent += static_cast<std::size_t>(n);
  if (io.quiet_peer) op_send_left_ -= std::min(op_send_left_, static_cast<std::size_t>(n));
  return Status::Ok();
}

Status AbortableRing::ReceiveSome(const Io& io, std::size_t& got) {
  const std::size_t chunk = io.reduce_into != nullptr ? ReduceChunk() : options_.chunk_bytes;
  const std::size_t chunk_start = io.reduce_into != nullptr ? got - got % chunk : got;
  const std::size_t chunk_len = std::min(chunk, io.recv_len - chunk_start);
  char* dst = io.reduce_into != nullptr ? reinterpret_cast<char*>(scratch_.data()) + (got - chunk_start)
                                        : io.recv + got;
  const ssize_t n = ::recv(io.recv_fd, dst, chunk_start + chunk_len - got, MSG_DONTWAIT);
  const int err = n < 0 ? errno : 0;
  if (n < 0 && RingRetryable(err)) return Status::Ok();
  if (n <= 0) return Status::Unavailable(Prefix() + RingPeerFailure(*io.recv_who, err, io.what));
  got += static_cast<std::size_t>(n);
  if (io.reduce_into != nullptr && got == chunk_start + chunk_len) {
    ReduceChunkInto(io.reduce_into + chunk_start, chunk_len);
  }
  return Status::Ok();
}

RingClock::time_point AbortableRing::NextDeadline() const {
  if (options_.stall_timeout.count() == 0) return RingClock::time_point::max();
  return RingClock::now() + options_.stall_timeout;
}

}  // namespace ctrun::trainer
