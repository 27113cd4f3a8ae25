#include "trainer/ft/heal_fetch.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "base/ft_wire/host_port.h"
#include "trainer/comm/ring_wire.h"
#include "trainer/ft/heal_wire.h"

namespace ctrun::trainer::ft {
namespace {

using FetchClock = std::chrono::steady_clock;

// One connection to one source; closes its socket when destroyed.
class HealSourceFetch {
 public:
  explicit HealSourceFetch(const FetchOptions& options) : options_(options) {}
  ~HealSourceFetch() {
    if (fd_ >= 0) ::close(fd_);
  }
  HealSourceFetch(const HealSourceFetch&) = delete;
  HealSourceFetch& operator=(const HealSourceFetch&) = delete;

  // The state; Aborted, or another failure of this source (its message
  // without the source's name).
  Result<std::string> Run(const std::string& source, const HealRequest& request) {
    auto where = ft_wire::ParseHostPort(source, "healing source");
    if (!where.ok()) return where.status();
    auto fd = RingStartConnect(where->host, where->port);
    if (!fd.ok()) return fd.status();
    fd_ = *fd;
    CTRUN_RETURN_IF_ERROR(Wait(POLLOUT, "connecting"));
    CTRUN_RETURN_IF_ERROR(RingConnectResult(fd_, source));
    const auto hello = EncodeHealRequest(request);
    CTRUN_RETURN_IF_ERROR(SendAll(hello.data(), hello.size()));
    std::array<char, kHealReplyBytes> header{};
    CTRUN_RETURN_IF_ERROR(ReceiveExact(header.data(), header.size(), "waiting for its reply"));
    auto reply = DecodeHealReply(header, options_.max_bytes);
    if (!reply.ok()) return reply.status();
    if (reply->kind == kHealRefused) {
      std::array<char, kHealMaxReasonBytes> reason{};
      CTRUN_RETURN_IF_ERROR(ReceiveExact(reason.data(), reply->size, "reading its refusal"));
      return Status::FailedPrecondition(std::string(reason.data(), reply->size));
    }
    return ReceiveState(reply->size);
  }

 private:
  Status Wait(short events, const char* what) {
    pollfd fds[2] = {{fd_, events, 0}, {options_.abort_fd, POLLIN, 0}};
    const nfds_t n = options_.abort_fd >= 0 ? 2 : 1;
    for (;;) {
      const auto left = deadline_ - FetchClock::now();
      if (left <= FetchClock::duration::zero()) {
        return Status::DeadlineExceeded("no progress for " + std::to_string(options_.stall_timeout.count()) +
                                        " ms " + what);
      }
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      const int ready = ::poll(fds, n, static_cast<int>(std::min<decltype(ms)>(ms, INT_MAX)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return Status::IOError(std::string("poll failed: ") + std::strerror(errno));
      if (n == 2 && fds[1].revents != 0) return Status::Aborted(std::string("healing aborted while ") + what);
      if (ready > 0) return Status::Ok();
    }
  }

  Status SendAll(const char* data, std::size_t size) {
    std::size_t sent = 0;
    while (sent < size) {
      CTRUN_RETURN_IF_ERROR(Wait(POLLOUT, "sending its request"));
      const ssize_t n = ::send(fd_, data + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n < 0) return Status::Unavailable(std::string("cannot send its request: ") + std::strerror(errno));
      sent += static_cast<std::size_t>(n);
      Progress();
    }
    return Status::Ok();
  }

  // Reads up to `size` bytes into `out`; 0 at the end of the stream.
  Result<std::size_t> ReceiveSome(char* out, std::size_t size, const char* what) {
    for (;;) {
      CTRUN_RETURN_IF_ERROR(Wait(POLLIN, what));
      const ssize_t n = ::recv(fd_, out, size, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n < 0 && errno == ECONNRESET) return std::size_t{0};
      if (n < 0) return Status::Unavailable(std::string("cannot read from it: ") + std::strerror(errno));
      Progress();
      return static_cast<std::size_t>(n);
    }
  }

  Status ReceiveExact(char* out, std::size_t size, const char* what) {
    std::size_t got = 0;
    while (got < size) {
      auto n = ReceiveSome(out + got, size - got, what);
      if (!n.ok()) return n.status();
      if (*n == 0) return Status::Unavailable(std::string("it closed the connection ") + what);
      got += *n;
    }
    return Status::Ok();
  }

  Result<std::string> ReceiveState(uint64_t size) {
    std::string state;
    std::size_t got = 0;
    while (got < size) {
      const std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(options_.chunk_bytes, size - got));
      state.resize(got + want);
      auto n = ReceiveSome(state.data() + got, want, "receiving the state");
      if (!n.ok()) return n.status();
      if (*n == 0) {
        return Status::Unavailable("it closed the connection after " + std::to_string(got) + " of " +
                                   std::to_string(size) + " bytes of the state");
      }
      got += *n;
    }
    state.resize(got);
    return state;
  }

  void Progress() { deadline_ = FetchClock::now() + options_.stall_timeout; }

  const FetchOptions& options_;
  int fd_ = -1;
  FetchClock::time_point deadline_ = FetchClock::now() + options_.stall_timeout;
};

}  // namespace

Result<Fetched> FetchHealState(const std::vector<std::string>& sources, int64_t quorum_id, int64_t step,
                               const FetchOptions& options) {
  const std::string what = "the state before step " + std::to_string(step) + " of quorum " + std::to_string(quorum_id);
  if (sources.empty()) return Status::InvalidArgument("no healing source for " + what);
  if (options.stall_timeout.count() <= 0 || options.chunk_bytes == 0) {
    return Status::InvalidArgument("healing: stall_timeout and chunk_bytes must be > 0");
  }
  const auto start = FetchClock::now();
  std::string failures;
  for (const std::string& source : sources) {
    HealSourceFetch fetch(options);
    auto state = fetch.Run(source, HealRequest{quorum_id, step});
    if (state.ok()) {
      const std::chrono::duration<double> took = FetchClock::now() - start;
      return Fetched{std::move(state).value(), source, took.count()};
    }
    if (state.status().code() == Status::Code::kAborted) {
      return Status::Aborted(state.status().message() + " " + source + " for " + what);
    }
    failures += (failures.empty() ? "" : "; ") + source + ": " + state.status().message();
  }
  return Status::Unavailable("no healing source served " + what + ": " + failures);
}

}  // namespace ctrun::trainer::ft
