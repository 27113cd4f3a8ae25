// store_load's client side: see store_load_loop.h.
#include "store_load_loop.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "store_load_retry.h"

namespace store_load {

namespace {
constexpr int kMaxProblemsPrinted = 10;
constexpr uint32_t kFirstSource = (127u << 24) | (1u << 16) | 1u;  // 127.1.0.1
constexpr uint32_t kSources = 65533;                                 // up to 127.1.255.254
}  // namespace

Loop::Loop(const Options& o)
    : o_(o), deadline_(Clock::now() + std::chrono::milliseconds(static_cast<long>(o.timeout * 1000))) {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  addr_.sin_family = AF_INET;
  addr_.sin_port = htons(static_cast<uint16_t>(o.port));
  if (inet_pton(AF_INET, o.host.c_str(), &addr_.sin_addr) != 1) {
    Usage("--host wants an IPv4 address, got '" + o.host + "'");
  }
  if (o.clients_per_address > 0 && (ntohl(addr_.sin_addr.s_addr) >> 24) != 127) {
    Usage("--host " + o.host + ": clients bind loopback source addresses; use a 127.x.y.z host or "
          "--clients-per-address 0");
  }
}

void Loop::Problem(const std::string& what) {
  if (++errors_ <= kMaxProblemsPrinted) std::fprintf(stderr, "store_load: %s\n", what.c_str());
}

bool Loop::Connect(Conn& c) {
  c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) {
    Problem(std::string("socket: ") + std::strerror(errno));
    return false;
  }
  const int one = 1;
  setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (o_.clients_per_address > 0) {
    // The client's source address: a node's worth of clients (K) per
    // address, from 127.1.0.1 up, each with its own ephemeral ports; a
    // retry keeps its client's.
    if (c.source == 0) {
      const uint64_t node = sources_used_ / static_cast<uint64_t>(o_.clients_per_address);
      c.source = kFirstSource + static_cast<uint32_t>(node % kSources);
      ++sources_used_;
    }
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(c.source);
    if (bind(c.fd, reinterpret_cast<const sockaddr*>(&source), sizeof(source)) != 0) {
      Problem(std::string("bind to a loopback source address: ") + std::strerror(errno));
      ++connect_failures_;
      return false;
    }
  }
  if (c.tries++ == 0) c.connect_start = Clock::now();
  if (connect(c.fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof(addr_)) != 0 && errno != EINPROGRESS) {
    if (RetryableConnectError(errno)) return Retry(c, std::string("connect: ") + std::strerror(errno));
    Problem(std::string("connect: ") + std::strerror(errno));
    ++connect_failures_;
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.ptr = &c;
  c.want_out = true;
  epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev);
  return true;
}

void Loop::Queue(Conn& c, const StoreRequest& req) {
  if (ctrun::Status st = AppendStoreRequest(c.out, ctrun::rdzv::StoreDialect::kV1, req); !st.ok()) {
    Problem(st.message());
    return;
  }
  if (ctrun::rdzv::StoreOpHasReply(req.op)) c.due.push_back(&req);
}

void Loop::Flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN) break;
      if (!c.replied && (errno == ECONNRESET || errno == EPIPE)) {
        Retry(c, std::string("send: ") + std::strerror(errno));
        return;
      }
      Problem(std::string("send: ") + std::strerror(errno));
      Close(c);
      return;
    }
    c.out_off += static_cast<size_t>(n);
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  }
  const bool want = c.out_off < c.out.size() || !c.connected;
  if (want != c.want_out) {
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.ptr = &c;
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
    c.want_out = want;
  }
}

void Loop::Close(Conn& c) {
  if (c.fd < 0) return;
  close(c.fd);
  c.fd = -1;
  ++closed_;
}

bool Loop::FinishConnect(Conn& c) {
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    if (RetryableConnectError(err)) {
      Retry(c, std::string("connect: ") + std::strerror(err));
      return false;
    }
    Problem(std::string("connect: ") + std::strerror(err));
    ++connect_failures_;
    Close(c);
    return false;
  }
  c.connected = true;
  return true;
}

bool Loop::Receive(Conn& c, std::vector<char>& buf) {
  for (;;) {
    const ssize_t r = recv(c.fd, buf.data(), buf.size(), 0);
    if (r > 0) {
      c.in.append(buf.data(), static_cast<size_t>(r));
      if (static_cast<size_t>(r) < buf.size()) break;
      continue;
    }
    if (r < 0 && errno == EAGAIN) break;
    if (!c.replied && !c.due.empty() && (r == 0 || errno == ECONNRESET)) {
      Retry(c, r == 0 ? "the server closed a connection before its first reply"
                      : std::string("recv: ") + std::strerror(errno));
      break;
    }
    if (!c.due.empty() || r < 0) {
      Problem(r == 0 ? "the server closed a connection with a reply due"
                     : std::string("recv: ") + std::strerror(errno));
    }
    Close(c);
    break;
  }
  return c.fd >= 0;
}

bool Loop::Retry(Conn& c, const std::string& why) {
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
  c.connected = false;
  c.want_out = false;
  c.out.clear();
  c.out_off = 0;
  c.in.clear();
  c.in_off = 0;
  c.due.clear();
  const int attempt = c.tries - 1;
  const auto at = Clock::now() + RetryDelay(attempt, std::uniform_real_distribution<double>(0, 1)(rng_));
  if (at >= deadline_) {
    Problem(why + " (" + std::to_string(c.tries) + " tries; the next would pass --timeout)");
    ++connect_failures_;
    return false;
  }
  ++retries_;
  retry_at_.push({at, &c});
  return true;
}

int Loop::StartDueRetries() {
  const Clock::time_point now = Clock::now();
  while (!retry_at_.empty() && retry_at_.top().first <= now) {
    Conn& c = *retry_at_.top().second;
    retry_at_.pop();
    Connect(c);
  }
  if (retry_at_.empty()) return 100;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(retry_at_.top().first - now).count();
  return static_cast<int>(std::clamp<long>(ms, 0, 100));
}

}  // namespace store_load
