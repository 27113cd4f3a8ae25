// store_load's client side: Conn, one non-blocking TCP connection to the
// store (bytes out, bytes in, the requests whose replies are due), and Loop,
// the one epoll loop that connects, sends, reads and parses the replies with
// rendezvous/store/store_protocol.h (torch 1.13's TCPStore protocol, V1).
// Loop counts problems (the first few printed on stderr) and connect
// failures. The caller owns the Conns, which must outlive the Loop's use of
// them (epoll holds their addresses). One thread: everything runs in the
// caller's Run.
#pragma once

#include <netinet/in.h>
#include <sys/epoll.h>

#include <cstdint>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/store/store_protocol.h"
#include "store_load_options.h"
#include "store_load_report.h"

namespace store_load {

using ctrun::rdzv::StoreReply;
using ctrun::rdzv::StoreRequest;

// One client connection: bytes out, bytes in, and the requests whose replies
// are due, in order.
struct Conn {
  int fd = -1;
  bool connected = false;
  bool want_out = false;
  std::string out;
  size_t out_off = 0;
  std::string in;
  size_t in_off = 0;
  std::vector<const StoreRequest*> due;  // requests with a reply, oldest first
  Clock::time_point sent;
  // mix
  int step = 0;
  long cycle = 0;
  bool done = false;
  int64_t last_add = 0;
  StoreRequest set, get, add, wait, cas;
  // storm
  Clock::time_point connect_start;  // the first try's
  // retries
  int tries = 0;          // connects started
  bool replied = false;   // a reply came on this connection
  uint32_t source = 0;    // the source address, kept across retries (0: the kernel's)
};

class Loop {
 public:
  // Exits through Usage when --host is not an IPv4 address.
  explicit Loop(const Options& o);

  // Counts a problem; prints the first few on stderr.
  void Problem(const std::string& what);

  // Starts a non-blocking connect; the connection is ready on EPOLLOUT.
  // A retryable failure schedules a retry (true); any other counts (false).
  bool Connect(Conn& c);

  // Queues `req` (and expects its reply if it has one); Flush sends.
  // `req` must outlive its reply.
  void Queue(Conn& c, const StoreRequest& req);

  void Flush(Conn& c);

  void Close(Conn& c);

  // Runs until `finished()` or the timeout; calls on_ready(c) when a
  // connect completes and on_reply(c, req, reply) per reply.
  template <typename Ready, typename Reply, typename Finished>
  bool Run(Ready on_ready, Reply on_reply, Finished finished);

  int errors() const { return errors_; }
  int connect_failures() const { return connect_failures_; }
  int retries() const { return retries_; }

 private:
  // A connect completed (EPOLLOUT/ERR/HUP before `connected`): true when it
  // succeeded; on failure the connection is counted and closed.
  bool FinishConnect(Conn& c);
  // Closes `c` and, while the --timeout allows the backoff, schedules its
  // next connect (true); otherwise counts a connect failure (false).
  bool Retry(Conn& c, const std::string& why);
  // Starts the connects whose backoff has passed; returns the epoll wait in
  // ms until the next one is due (at most 100).
  int StartDueRetries();
  // Reads what the socket has into c.in; false when the connection closed.
  bool Receive(Conn& c, std::vector<char>& buf);
  // Parses the replies now whole in c.in, in order, and hands each over.
  template <typename Reply>
  void Deliver(Conn& c, Reply& on_reply);

  const Options& o_;
  int ep_ = -1;
  sockaddr_in addr_{};
  int errors_ = 0;
  int connect_failures_ = 0;
  int closed_ = 0;
  uint64_t sources_used_ = 0;  // connections given a source address so far
  int retries_ = 0;
  Clock::time_point deadline_;
  using Due = std::pair<Clock::time_point, Conn*>;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> retry_at_;
  std::mt19937_64 rng_{0x5eed};
};

template <typename Reply>
void Loop::Deliver(Conn& c, Reply& on_reply) {
  while (!c.due.empty()) {
    StoreReply reply;
    const StoreRequest& req = *c.due.front();
    auto got = ctrun::rdzv::ParseStoreReply(std::string_view(c.in).substr(c.in_off), req, reply);
    if (!got.ok()) {
      Problem(got.status().message());
      Close(c);
      break;
    }
    if (!*got) break;
    c.due.erase(c.due.begin());
    c.replied = true;
    on_reply(c, req, reply);  // may queue more
    c.in_off += **got;
    if (c.fd < 0) break;
  }
}

template <typename Ready, typename Reply, typename Finished>
bool Loop::Run(Ready on_ready, Reply on_reply, Finished finished) {
  std::vector<epoll_event> events(1024);
  std::vector<char> buf(1 << 18);
  while (!finished()) {
    if (Clock::now() > deadline_) {
      Problem("--timeout ran out (" + std::to_string(o_.timeout) + " s) with work left");
      return false;
    }
    const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), StartDueRetries());
    for (int i = 0; i < n; ++i) {
      Conn& c = *static_cast<Conn*>(events[i].data.ptr);
      if (c.fd < 0) continue;
      if (!c.connected && (events[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        if (!FinishConnect(c)) continue;
        on_ready(c);
        if (c.fd >= 0) Flush(c);
        continue;
      }
      if (events[i].events & EPOLLOUT) Flush(c);
      if (c.fd < 0 || !(events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      if (!Receive(c, buf)) continue;
      Deliver(c, on_reply);
      if (c.fd < 0) continue;
      if (c.in_off == c.in.size()) {
        c.in.clear();
        c.in_off = 0;
      }
      Flush(c);
    }
  }
  return true;
}

}  // namespace store_load
