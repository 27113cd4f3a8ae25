// AbortableRing: a ring all-reduce (in place: a float32 sum, or an exact
// int64 sum) over TCP among N members, every wait of which can be cut short at once by
// Abort() from another thread or a signal handler. It averages gradients
// across replica groups under fault tolerance (docs/fault-tolerance.md,
// "Aborting a collective"), where Gloo's survivors block until the process
// group's timeout when a peer dies. Pure C++/POSIX (Linux): no torch.
//
// Life of a ring (one per quorum; a new quorum builds a new ring):
//   1. Listen(options): binds a socket at port 0 on options.listen_host and
//      reads the port back (port()).
//      Configure(ring_id, rank, size) may then replace the options' ring
//      id, rank and size, until Connect: a member listens (and reports its
//      port) before it knows the quorum its ring will serve.
//   2. The caller exchanges (host, port) among the members by any means.
//      Every member must have listened before any member connects.
//   3. Connect(right_host, right_port): connects to the right neighbour
//      (rank + 1 mod N) and accepts the left one (rank - 1 mod N); each end
//      checks the other's handshake (ring id, size, rank), so a connection
//      from another ring (a stale quorum) or a stranger is refused with a
//      one-line InvalidArgument and the ring fails.
//   4. AllReduceSum(data, count), as often as needed, by every member with
//      the same type and count in the same order.
//
// All-reduce: the bandwidth-optimal ring (reduce-scatter in N-1 steps, then
// all-gather in N-1 steps), sending to the right while receiving from the
// left in chunks of at most options.chunk_bytes (non-blocking sockets and
// poll). The buffer is cut into N segments, segment k holding elements
// [k*q + min(k, r), ...) with q = count / N, r = count % N, the first r one
// longer. Summation order: segment k is summed left to right starting at
// member k, ((x_k + x_(k+1)) + x_(k+2)) + ... + x_(k-1) (ranks mod N), by
// the member that receives the partial sum; the finished segment is then
// copied to every member. So every member ends with the same bits. The
// int64 sum (modulo 2^64) is exact, so its result is the same for any N,
// any order of the members and any split of the addends among them
// (--ft-exact, docs/fault-tolerance.md). Any count works (0, fewer
// elements than members, not divisible by N);
// N == 1 is a no-op. Memory: the caller's buffer and one chunk of scratch;
// every message has a fixed size, so a peer cannot make the ring allocate.
//
// Failure: the first failed or aborted call breaks the ring: it closes its
// sockets at once (so its neighbours' waits fail too, and theirs close in
// turn) and every later call returns FailedPrecondition naming the first
// failure. A call fails with
//   - Aborted once Abort() was called (before or during the call);
//   - Unavailable when a neighbour closes or resets its connection (seen at
//     once, while this member still has data to send to it or to receive);
//   - DeadlineExceeded when options.stall_timeout is set and one wait made
//     no progress (no byte sent or received) for that long;
//   - InvalidArgument for a refused handshake or neighbours whose calls
//     differ (sequence number or count).
// Each message is one line, names ring id and rank, what the ring was doing
// and which neighbour failed.
//
// Threads: one owning thread makes every call but Abort() (Listen's caller
// owns the ring; it may hand it to another thread, not share it). Abort()
// may be called from any thread or a signal handler, any number of times,
// concurrently with any call of the owning thread except the destructor:
// it only stores an atomic flag and writes an eventfd (async-signal-safe).
// options.before_wait runs on the owning thread.
#pragma once

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "trainer/comm/ring_wire.h"

namespace ctrun::trainer {

struct RingOptions {
  std::uint64_t ring_id = 0;  // e.g. the quorum id: members of one ring share it
  int rank = 0;               // 0 <= rank < size
  int size = 1;               // N, the number of members
  std::string listen_host = "0.0.0.0";  // numeric IPv4/IPv6 address to bind
  // The longest any single wait may make no progress; zero waits for ever
  // (until Abort() or a neighbour's failure).
  std::chrono::milliseconds stall_timeout{0};
  // The most bytes per send/receive and the scratch buffer's size: a
  // multiple of 4 in [4, 64 MiB].
  std::size_t chunk_bytes = 256 * 1024;
  // Called on the owning thread just before each wait (poll), with what the
  // ring waits for; lets tests see that a call is blocked. Must not call
  // into the ring (Abort() excepted).
  std::function<void(std::string_view what)> before_wait;
};

class AbortableRing {
 public:
  // Checks the options and listens. InvalidArgument for bad options,
  // IOError when the socket cannot be bound.
  static Result<std::unique_ptr<AbortableRing>> Listen(RingOptions options);
  ~AbortableRing();
  AbortableRing(const AbortableRing&) = delete;
  AbortableRing& operator=(const AbortableRing&) = delete;

  // The port Listen bound (valid until Connect returns).
  std::uint16_t port() const { return port_; }
  int rank() const { return options_.rank; }
  int size() const { return options_.size; }

  // Replaces the ring id, rank and size given to Listen. Only before
  // Connect: FailedPrecondition after it (or after a failure or Abort),
  // InvalidArgument unless 0 <= rank < size (the ring is then unchanged).
  Status Configure(std::uint64_t ring_id, int rank, int size);

  // Connects to the right neighbour at right_host (numeric) : right_port and
  // accepts the left neighbour; call once, after Listen. N == 1: no sockets.
  Status Connect(const std::string& right_host, std::uint16_t right_port);

  // Sums `count` floats at `data` over the members, in place (see above).
  // Requires Connect to have succeeded; `data` is the caller's, used only
  // during the call.
  Status AllReduceSum(float* data, std::size_t count);
  // The same for int64s, summed modulo 2^64 (exact: wrap-around is the
  // caller's to prevent).
  Status AllReduceSum(std::int64_t* data, std::size_t count);

  // Replaces options.stall_timeout for the calls that follow (zero: wait
  // for ever; a negative value is taken as zero). Owning thread, between
  // calls: a fault-tolerant worker sets it from its step times.
  void SetStallTimeout(std::chrono::milliseconds timeout) {
    options_.stall_timeout = std::max(timeout, std::chrono::milliseconds(0));
  }

  // Makes the current wait of the owning thread (or its next call) fail
  // with Aborted; that call closes the sockets (Abort() itself touches
  // none, so an idle ring's neighbours see the close at its next call or
  // its destruction). Any thread or signal handler; idempotent.
  void Abort() noexcept;

  // True once a call failed or was aborted: build a new ring.
  bool broken() const { return state_ == State::kBroken; }

 private:
  enum class State { kListening, kConnected, kBroken };
  // One transfer: send_len bytes to send_fd while receiving recv_len bytes from
  // recv_fd, into `recv` or, with reduce_into, reduced (op_) into reduce_into.
  struct Io {
    std::string what;  // "during all-reduce #3 (...)": for messages and before_wait
    int send_fd = -1;
    const std::string* send_who = nullptr;
    const char* send = nullptr;
    std::size_t send_len = 0;
    int recv_fd = -1;
    const std::string* recv_who = nullptr;
    char* recv = nullptr;
    std::size_t recv_len = 0;
    char* reduce_into = nullptr;
    // The peer at send_fd sends nothing on it now: readable means closed, so
    // it is watched while this op has bytes to send (op_send_left_ > 0).
    bool quiet_peer = false;
  };

  explicit AbortableRing(RingOptions options);
  int left_rank() const { return (options_.rank + options_.size - 1) % options_.size; }
  int right_rank() const { return (options_.rank + 1) % options_.size; }
  std::string Prefix() const;
  Status Usable(State wanted, std::string_view call);
  Status Fail(Status status);
  void CloseSockets();

  Status ConnectRight(const std::string& host, std::uint16_t port);
  Status AcceptLeft();
  Status Handshake();
  Status AllReduce(char* data, std::size_t count, RingReduceOp op, std::string_view call);
  Status ExchangeOpHeader(std::size_t count);
  Status Step(char* data, std::size_t count, int step);
  std::size_t ElementBytes() const;
  // The bytes received before each reduction: a multiple of the element size.
  std::size_t ReduceChunk() const;
  void ReduceChunkInto(char* into, std::size_t bytes);

  Status Move(const Io& io);
  Status WaitReady(pollfd* fds, int n, std::string_view what,
                   std::chrono::steady_clock::time_point deadline);
  Status CheckQuiet(int fd, const std::string& who, std::string_view what);
  Status ReceiveSome(const Io& io, std::size_t& got);
  Status SendSome(const Io& io, std::size_t& sent);
  std::chrono::steady_clock::time_point NextDeadline() const;

  RingOptions options_;
  int abort_fd_ = -1;
  std::atomic<bool> aborted_{false};
  int listen_fd_ = -1;
  int left_fd_ = -1;
  int right_fd_ = -1;
  std::uint16_t port_ = 0;
  State state_ = State::kListening;
  Status failure_;
  std::uint64_t op_seq_ = 0;
  std::size_t op_send_left_ = 0;  // bytes this all-reduce still sends to the right
  RingReduceOp op_ = RingReduceOp::kSumFloat;  // the all-reduce in progress
  std::string right_name_;  // "the right neighbour (rank 2 at 10.0.0.3:4000)"
  std::string left_name_;
  std::vector<std::uint64_t> scratch_;  // one reduce chunk (>= chunk_bytes): a received partial result
};

}  // namespace ctrun::trainer
