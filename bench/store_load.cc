// store_load: a load generator that speaks torch 1.13's TCPStore wire
// protocol (encoded and decoded by rendezvous/store/store_protocol.h, the
// same code ctrun's server parses with) to any server at HOST:PORT: ctrun's
// store or torch's own TCPStore. One thread, one epoll loop, non-blocking
// sockets. Every reply is checked against what the protocol says it must be;
// any mismatch is an error.
//
//   store_load --port P [--host H] mix --conns C --value-bytes V
//              (--seconds T [--warmup W] | --cycles K) [--server-pid PID]
//     C connections, each a closed loop (one request in flight, as a rank's
//     client is) over the cycle
//        SET k v + GET k (pipelined: SET has no reply) -> v
//        ADD total 1                 -> a count no other ADD got
//        WAIT [k]                    -> 0 (stop waiting: k exists)
//        COMPARE_SET k v w           -> w
//     with V-byte values (5 requests, 4 round trips). Timed mode measures T
//     seconds after W of warm-up; --cycles runs K cycles per connection and
//     measures all of them. Then one GET of `total` must equal the number of
//     ADDs made.
//   store_load --port P [--host H] storm --clients N [--server-pid PID]
//     N clients connect at once (non-blocking connects, all issued before
//     any reply is read); each ADDs 1 to a barrier key, the one that reads N
//     SETs a release key, each WAITs on the release key, then closes. Timed
//     from the first connect() to the last client released. Every ADD result
//     1..N must come back exactly once.
//
// Prints one JSON object on stdout: requests, seconds, requests_per_s,
// p50_us, p99_us (of requests with a reply, from sending to the whole reply
// read; a GET's includes its pipelined SET), server_cpu_s (utime + stime of
// --server-pid over the measured window, from /proc/PID/stat) and
// server_sys_s (its stime: the kernel's part), errors, and
// for storm the connect failures, the slowest connect, and the fd limit.
// Raises its RLIMIT_NOFILE soft limit as far as the connections need (never
// above the hard limit; says so on stderr).
//
// Exit codes: 0 every reply was right; 1 a reply was wrong, a connection
// failed or closed, or --timeout ran out (the first few problems are on
// stderr); 2 bad arguments.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rendezvous/store/store_protocol.h"

namespace {

using ctrun::rdzv::AppendStoreRequest;
using ctrun::rdzv::ParseStoreReply;
using ctrun::rdzv::StoreDialect;
using ctrun::rdzv::StoreOp;
using ctrun::rdzv::StoreReply;
using ctrun::rdzv::StoreRequest;
using Clock = std::chrono::steady_clock;

constexpr int kMaxProblemsPrinted = 10;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string mode;
  int conns = 1;
  size_t value_bytes = 64;
  double seconds = 0;
  double warmup = 0.2;
  long cycles = 0;
  int clients = 0;
  int server_pid = 0;
  double timeout = 300;
  std::string prefix = "load";
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "store_load: %s\n"
               "usage: store_load --port P [--host H] [--server-pid PID] [--prefix S] [--timeout S]\n"
               "         mix --conns C --value-bytes V (--seconds T [--warmup W] | --cycles K)\n"
               "       | storm --clients N\n",
               why.c_str());
  std::exit(2);
}

double Number(const std::string& flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || v < 0) Usage(flag + " wants a number >= 0, got '" + text + "'");
  return v;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "mix" || a == "storm") {
      o.mode = a;
      continue;
    }
    if (i + 1 >= argc) Usage(a == "--help" ? "help" : a + " wants a value (or is unknown)");
    const char* v = argv[++i];
    if (a == "--host") o.host = v;
    else if (a == "--port") o.port = static_cast<int>(Number(a, v));
    else if (a == "--conns") o.conns = static_cast<int>(Number(a, v));
    else if (a == "--value-bytes") o.value_bytes = static_cast<size_t>(Number(a, v));
    else if (a == "--seconds") o.seconds = Number(a, v);
    else if (a == "--warmup") o.warmup = Number(a, v);
    else if (a == "--cycles") o.cycles = static_cast<long>(Number(a, v));
    else if (a == "--clients") o.clients = static_cast<int>(Number(a, v));
    else if (a == "--server-pid") o.server_pid = static_cast<int>(Number(a, v));
    else if (a == "--timeout") o.timeout = Number(a, v);
    else if (a == "--prefix") o.prefix = v;
    else Usage("unknown argument '" + a + "'");
  }
  if (o.port <= 0 || o.port > 65535) Usage("--port wants the server's port (1-65535)");
  if (o.mode == "mix") {
    if (o.conns < 1) Usage("--conns wants at least 1");
    if (o.value_bytes < 16) Usage("--value-bytes wants at least 16");
    if ((o.seconds > 0) == (o.cycles > 0)) Usage("mix wants one of --seconds and --cycles");
  } else if (o.mode == "storm") {
    if (o.clients < 1) Usage("storm wants --clients N (N >= 1)");
  } else {
    Usage("name a mode: mix or storm");
  }
  return o;
}

// The CPU time `pid` has used, in seconds: all of it (utime + stime) and
// the kernel's part (stime); zeros without a pid.
struct Cpu {
  double total = 0;
  double sys = 0;
  Cpu operator-(const Cpu& o) const { return Cpu{total - o.total, sys - o.sys}; }
};

Cpu ServerCpu(int pid) {
  if (pid <= 0) return {};
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) {
    std::fprintf(stderr, "store_load: cannot read /proc/%d/stat (is the server running?)\n", pid);
    std::exit(1);
  }
  std::istringstream rest(line.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 0; i < 13 && rest >> field; ++i) {  // fields 3.. of stat(5)
    if (i == 11) utime = std::stoull(field);
    if (i == 12) stime = std::stoull(field);
  }
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return Cpu{static_cast<double>(utime + stime) / tick, static_cast<double>(stime) / tick};
}

// Raises the soft RLIMIT_NOFILE to cover `fds` (within the hard limit).
rlim_t RaiseFdLimit(size_t fds) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < fds) {
    const rlim_t old = lim.rlim_cur;
    lim.rlim_cur = std::min<rlim_t>(fds, lim.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) {
      std::fprintf(stderr, "store_load: raised the open-files limit from %llu to %llu (hard %llu)\n",
                   static_cast<unsigned long long>(old), static_cast<unsigned long long>(lim.rlim_cur),
                   static_cast<unsigned long long>(lim.rlim_max));
    }
    getrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_cur < fds) {
      std::fprintf(stderr, "store_load: %zu connections need %zu open files; the hard limit is %llu\n",
                   fds - 16, fds, static_cast<unsigned long long>(lim.rlim_max));
      std::exit(1);
    }
  }
  return lim.rlim_cur;
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t at = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(at), v.end());
  return v[at];
}

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
  Clock::time_point connect_start;
};

class Loop {
 public:
  explicit Loop(const Options& o) : o_(o) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(static_cast<uint16_t>(o.port));
    if (inet_pton(AF_INET, o.host.c_str(), &addr_.sin_addr) != 1) {
      Usage("--host wants an IPv4 address, got '" + o.host + "'");
    }
  }

  void Problem(const std::string& what) {
    if (++errors_ <= kMaxProblemsPrinted) std::fprintf(stderr, "store_load: %s\n", what.c_str());
  }

  // Starts a non-blocking connect; the connection is ready on EPOLLOUT.
  bool Connect(Conn& c) {
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
      Problem(std::string("socket: ") + std::strerror(errno));
      return false;
    }
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c.connect_start = Clock::now();
    if (connect(c.fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof(addr_)) != 0 &&
        errno != EINPROGRESS) {
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

  // Queues `req` (and expects its reply if it has one); Flush sends.
  void Queue(Conn& c, const StoreRequest& req) {
    if (ctrun::Status st = AppendStoreRequest(c.out, StoreDialect::kV1, req); !st.ok()) {
      Problem(st.message());
      return;
    }
    if (ctrun::rdzv::StoreOpHasReply(req.op)) c.due.push_back(&req);
  }

  void Flush(Conn& c) {
    while (c.out_off < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN) break;
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

  void Close(Conn& c) {
    if (c.fd < 0) return;
    close(c.fd);
    c.fd = -1;
    ++closed_;
  }

  // Runs until `finished()` or the timeout; calls on_ready(c) when a
  // connect completes and on_reply(c, req, reply) per reply.
  template <typename Ready, typename Reply, typename Finished>
  bool Run(Ready on_ready, Reply on_reply, Finished finished) {
    const Clock::time_point deadline =
        Clock::now() + std::chrono::milliseconds(static_cast<long>(o_.timeout * 1000));
    std::vector<epoll_event> events(1024);
    std::vector<char> buf(1 << 18);
    while (!finished()) {
      if (Clock::now() > deadline) {
        Problem("--timeout ran out (" + std::to_string(o_.timeout) + " s) with work left");
        return false;
      }
      const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), 100);
      for (int i = 0; i < n; ++i) {
        Conn& c = *static_cast<Conn*>(events[i].data.ptr);
        if (c.fd < 0) continue;
        if (!c.connected && (events[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
          int err = 0;
          socklen_t len = sizeof(err);
          getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) {
            Problem(std::string("connect: ") + std::strerror(err));
            ++connect_failures_;
            Close(c);
            continue;
          }
          c.connected = true;
          on_ready(c);
          if (c.fd < 0) continue;
          Flush(c);
          continue;
        }
        if (events[i].events & EPOLLOUT) Flush(c);
        if (c.fd < 0 || !(events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
        for (;;) {
          const ssize_t r = recv(c.fd, buf.data(), buf.size(), 0);
          if (r > 0) {
            c.in.append(buf.data(), static_cast<size_t>(r));
            if (static_cast<size_t>(r) < buf.size()) break;
            continue;
          }
          if (r < 0 && errno == EAGAIN) break;
          if (!c.due.empty() || r < 0) {
            Problem(r == 0 ? "the server closed a connection with a reply due"
                           : std::string("recv: ") + std::strerror(errno));
          }
          Close(c);
          break;
        }
        if (c.fd < 0) continue;
        while (!c.due.empty()) {
          StoreReply reply;
          const StoreRequest& req = *c.due.front();
          auto got = ParseStoreReply(std::string_view(c.in).substr(c.in_off), req, reply);
          if (!got.ok()) {
            Problem(got.status().message());
            Close(c);
            break;
          }
          if (!*got) break;
          c.due.erase(c.due.begin());
          on_reply(c, req, reply);  // may queue more
          c.in_off += **got;
          if (c.fd < 0) break;
        }
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

  int errors() const { return errors_; }
  int connect_failures() const { return connect_failures_; }

 private:
  const Options& o_;
  int ep_ = -1;
  sockaddr_in addr_{};
  int errors_ = 0;
  int connect_failures_ = 0;
  int closed_ = 0;
};

// A value of `bytes` bytes that says which connection, cycle and side wrote it.
void Stamp(std::string& v, size_t bytes, int conn, long cycle, char side) {
  if (v.size() != bytes) v.assign(bytes, 'x');
  char head[32];
  std::snprintf(head, sizeof(head), "%c%07x%08lx", side, conn & 0xfffffff, cycle & 0xffffffffL);
  std::memcpy(v.data(), head, 16);
}

std::string Json(const std::vector<std::pair<std::string, double>>& fields) {
  std::string s = "{";
  for (const auto& [k, v] : fields) {
    if (s.size() > 1) s += ", ";
    char num[64];
    std::snprintf(num, sizeof(num), "%.9g", v);
    s += "\"" + k + "\": " + num;
  }
  return s + "}";
}

double Since(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int Mix(const Options& o) {
  RaiseFdLimit(static_cast<size_t>(o.conns) + 16);
  Loop loop(o);
  std::vector<Conn> conns(static_cast<size_t>(o.conns));
  const std::string total_key = "/" + o.prefix + "/total";
  int64_t adds = 0;
  std::vector<bool> seen_add;  // ADD results, to catch a count handed out twice
  std::vector<double> lat_us;
  long requests = 0;
  bool timed = o.seconds > 0;
  Clock::time_point start = Clock::now(), window_start{}, window_end{};
  bool measuring = !timed, stopping = false;
  Cpu cpu0 = timed ? Cpu{} : ServerCpu(o.server_pid);
  if (!timed) window_start = start;
  int finished = 0;

  auto next = [&](Conn& c) {
    const int id = static_cast<int>(&c - conns.data());
    if (stopping || (!timed && c.cycle >= o.cycles)) {
      if (!c.done) {
        c.done = true;
        ++finished;
      }
      return;
    }
    c.sent = Clock::now();
    switch (c.step) {
      case 0:
        Stamp(c.set.values[0], o.value_bytes, id, c.cycle, 'v');
        loop.Queue(c, c.set);
        loop.Queue(c, c.get);
        break;
      case 1: loop.Queue(c, c.add); break;
      case 2: loop.Queue(c, c.wait); break;
      case 3:
        c.cas.values[0] = c.set.values[0];
        Stamp(c.cas.values[1], o.value_bytes, id, c.cycle, 'w');
        loop.Queue(c, c.cas);
        break;
    }
  };

  for (size_t i = 0; i < conns.size(); ++i) {
    Conn& c = conns[i];
    const std::string key = "/" + o.prefix + "/k" + std::to_string(i);
    c.set.op = StoreOp::kSet;
    c.set.keys = {key};
    c.set.values = {std::string()};
    c.get.op = StoreOp::kGet;
    c.get.keys = {key};
    c.add.op = StoreOp::kAdd;
    c.add.keys = {total_key};
    c.add.number = 1;
    c.wait.op = StoreOp::kWait;
    c.wait.keys = {key};
    c.cas.op = StoreOp::kCompareSet;
    c.cas.keys = {key};
    c.cas.values = {std::string(), std::string()};
    if (!loop.Connect(c)) return 1;
  }

  auto on_reply = [&](Conn& c, const StoreRequest& req, const StoreReply& r) {
    const Clock::time_point now = Clock::now();
    bool ok = true;
    switch (req.op) {
      case StoreOp::kGet:
        ok = r.values.size() == 1 && r.values[0] == c.set.values[0];
        if (!ok) loop.Problem("GET " + req.keys[0] + " returned another value than the SET before it");
        break;
      case StoreOp::kAdd:
        ++adds;
        if (r.number < 1 || r.number <= c.last_add) {
          ok = false;
          loop.Problem("ADD " + req.keys[0] + " returned " + std::to_string(r.number) +
                       " after " + std::to_string(c.last_add));
        } else {
          if (static_cast<size_t>(r.number) >= seen_add.size()) seen_add.resize(static_cast<size_t>(r.number) * 2 + 1);
          if (seen_add[static_cast<size_t>(r.number)]) {
            ok = false;
            loop.Problem("ADD " + req.keys[0] + " returned " + std::to_string(r.number) + " twice");
          }
          seen_add[static_cast<size_t>(r.number)] = true;
        }
        c.last_add = r.number;
        break;
      case StoreOp::kWait:
        ok = r.number == 0;
        if (!ok) loop.Problem("WAIT on an existing key replied " + std::to_string(r.number) + ", not 0");
        break;
      case StoreOp::kCompareSet:
        ok = r.values.size() == 1 && r.values[0] == c.cas.values[1];
        if (!ok) loop.Problem("COMPARE_SET " + req.keys[0] + " did not reply with the desired value");
        break;
      default:
        break;
    }
    if (!ok) {
      loop.Close(c);
      return;
    }
    if (measuring && c.sent >= window_start && (window_end == Clock::time_point{} || now <= window_end)) {
      lat_us.push_back(std::chrono::duration<double, std::micro>(now - c.sent).count());
      requests += c.step == 0 ? 2 : 1;
    }
    c.step = (c.step + 1) % 4;
    if (c.step == 0) ++c.cycle;
    next(c);
  };

  const bool ran = loop.Run(
      [&](Conn& c) { next(c); },
      on_reply,
      [&]() {
        if (loop.errors() > 0) return true;
        if (timed) {
          const Clock::time_point now = Clock::now();
          if (!measuring && Since(start, now) >= o.warmup) {
            measuring = true;
            window_start = now;
            cpu0 = ServerCpu(o.server_pid);
          } else if (measuring && !stopping && Since(window_start, now) >= o.seconds) {
            stopping = true;
            window_end = now;
            for (Conn& c : conns) {
              if (c.due.empty() && !c.done) {
                c.done = true;
                ++finished;
              }
            }
          }
          if (stopping) {
            for (Conn& c : conns) {
              if (c.due.empty() && !c.done) {
                c.done = true;
                ++finished;
              }
            }
          }
        }
        return finished == o.conns;
      });
  if (window_end == Clock::time_point{}) window_end = Clock::now();
  const Cpu cpu = ServerCpu(o.server_pid) - cpu0;

  // The count: one more GET of the shared counter (every ADD replied).
  if (ran && loop.errors() == 0) {
    Conn& c = conns[0];
    c.get.keys = {total_key};
    const std::string expect = std::to_string(adds);
    bool got_it = false;
    loop.Queue(c, c.get);
    loop.Flush(c);
    loop.Run([](Conn&) {},
             [&](Conn&, const StoreRequest&, const StoreReply& r) {
               got_it = true;
               if (r.values.size() != 1 || r.values[0] != expect) {
                 loop.Problem("GET " + total_key + " returned '" +
                              std::string(r.values.empty() ? "" : r.values[0]) + "' after " + expect +
                              " ADDs");
               }
             },
             [&]() { return got_it || loop.errors() > 0; });
  }
  for (Conn& c : conns) loop.Close(c);

  const double secs = Since(window_start, window_end);
  const double p50 = Percentile(lat_us, 0.50), p99 = Percentile(lat_us, 0.99);
  std::printf("%s\n", Json({{"requests", static_cast<double>(requests)},
                            {"seconds", secs},
                            {"requests_per_s", secs > 0 ? static_cast<double>(requests) / secs : 0},
                            {"p50_us", p50},
                            {"p99_us", p99},
                            {"server_cpu_s", cpu.total},
                            {"server_sys_s", cpu.sys},
                            {"adds", static_cast<double>(adds)},
                            {"conns", o.conns},
                            {"value_bytes", static_cast<double>(o.value_bytes)},
                            {"errors", loop.errors()}})
                          .c_str());
  return loop.errors() == 0 && ran ? 0 : 1;
}

int Storm(const Options& o) {
  const rlim_t limit = RaiseFdLimit(static_cast<size_t>(o.clients) + 16);
  Loop loop(o);
  std::vector<Conn> clients(static_cast<size_t>(o.clients));
  const std::string barrier = "/" + o.prefix + "/barrier", release = "/" + o.prefix + "/release";
  StoreRequest add{StoreOp::kAdd, {barrier}, {}, 1};
  StoreRequest set{StoreOp::kSet, {release}, {"1"}, 0};
  StoreRequest wait{StoreOp::kWait, {release}, {}, 0};
  std::vector<bool> seen(static_cast<size_t>(o.clients) + 1);
  int released = 0;
  double slowest_connect = 0;
  Clock::time_point last{};

  const Cpu cpu0 = ServerCpu(o.server_pid);
  const Clock::time_point t0 = Clock::now();
  for (Conn& c : clients) {
    if (!loop.Connect(c)) break;
  }
  const bool ran = loop.Run(
      [&](Conn& c) {
        slowest_connect = std::max(slowest_connect, Since(c.connect_start, Clock::now()));
        loop.Queue(c, add);
      },
      [&](Conn& c, const StoreRequest& req, const StoreReply& r) {
        if (req.op == StoreOp::kAdd) {
          if (r.number < 1 || r.number > o.clients || seen[static_cast<size_t>(r.number)]) {
            loop.Problem("the barrier's ADD returned " + std::to_string(r.number) +
                         " (out of 1.." + std::to_string(o.clients) + " or twice)");
            loop.Close(c);
            return;
          }
          seen[static_cast<size_t>(r.number)] = true;
          if (r.number == o.clients) loop.Queue(c, set);
          loop.Queue(c, wait);
        } else if (req.op == StoreOp::kWait) {
          if (r.number != 0) {
            loop.Problem("WAIT on the release key replied " + std::to_string(r.number) + ", not 0");
          }
          ++released;
          last = Clock::now();
          loop.Close(c);
        }
      },
      [&]() { return released == o.clients || loop.errors() > 0; });
  const Cpu cpu = ServerCpu(o.server_pid) - cpu0;
  for (Conn& c : clients) loop.Close(c);
  std::printf("%s\n", Json({{"clients", o.clients},
                            {"released", released},
                            {"seconds", released == o.clients ? Since(t0, last) : 0},
                            {"slowest_connect_s", slowest_connect},
                            {"connect_failures", loop.connect_failures()},
                            {"server_cpu_s", cpu.total},
                            {"server_sys_s", cpu.sys},
                            {"fd_limit", static_cast<double>(limit)},
                            {"errors", loop.errors()}})
                          .c_str());
  return loop.errors() == 0 && ran && released == o.clients ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  return o.mode == "mix" ? Mix(o) : Storm(o);
}
