// ft_floor_load's clients: see ft_floor_clients.h.
#include "ft_floor_clients.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace ft_floor_load {
namespace {

constexpr uint32_t kFloorFirstSource = (127u << 24) | (3u << 16) | 1u;  // 127.3.0.1
constexpr uint32_t kFloorSources = 65533;                               // up to 127.3.255.254

std::chrono::steady_clock::duration FloorSeconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

int FloorClients::Run() {
  bool ok = Connect();
  Clock::time_point next = Clock::now();
  for (int step = 0; ok && step <= o_.steps; ++step) {  // step 0: every connection in, not measured
    std::this_thread::sleep_until(next);
    next = Clock::now() + FloorSeconds(o_.step_s);
    ok = Step(step);
  }
  end_usage_ = bench_load::ReadServerUsage(server_);
  CloseAll();
  ok = EndServer() && ok && error_.empty();
  Report(ok);
  return ok ? 0 : 1;
}

bool FloorClients::Connect() {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  clients_.resize(static_cast<size_t>(o_.groups));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<uint16_t>(port_));
  const timeval bound{static_cast<time_t>(o_.timeout_s), 0};  // a connect waits at most this
  for (size_t i = 0; i < clients_.size(); ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      Fail(std::string("socket: ") + std::strerror(errno));
      return false;
    }
    clients_[i].fd = fd;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));  // ports picked per peer at connect
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(kFloorFirstSource + static_cast<uint32_t>(i / o_.per_address) % kFloorSources);
    if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      Fail("connection " + std::to_string(i) + " to the floor server: " + std::strerror(errno));
      return false;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }
  return true;
}

bool FloorClients::Step(int64_t step) {
  const bench_load::ServerUsage before = bench_load::ReadServerUsage(server_);
  frame_.clear();
  AppendFrame(frame_, step, static_cast<size_t>(o_.request_bytes));
  for (Client& c : clients_) {
    if (send(c.fd, frame_.data(), frame_.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(frame_.size())) {
      Fail("step " + std::to_string(step) + ": a frame did not go out whole (" + std::strerror(errno) +
           "): the server stopped reading");
      return false;
    }
  }
  const Clock::time_point sent = Clock::now(), give_up = sent + FloorSeconds(o_.timeout_s);
  Clock::time_point last = sent;
  int pending = o_.groups;
  std::vector<epoll_event> events(1024);
  while (pending > 0 && error_.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count();
    if (left <= 0) {
      Fail("timed out (--timeout-s) waiting for the answers at step " + std::to_string(step));
      break;
    }
    const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), static_cast<int>(left) + 1);
    for (int i = 0; i < n && error_.empty(); ++i) Read(clients_[events[i].data.u32], step, &pending, &last);
  }
  if (!error_.empty()) return false;
  if (step == 0) return true;
  const bench_load::ServerUsage after = bench_load::ReadServerUsage(server_);
  latency_s_.push_back(std::chrono::duration<double>(last - sent).count());
  cpu_s_.push_back(after.cpu_s - before.cpu_s);
  rss_kib_.push_back(after.rss_kib);
  return true;
}

bool FloorClients::Read(Client& c, int64_t step, int* pending, Clock::time_point* last) {
  char buf[4096];
  const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) {
    Fail("step " + std::to_string(step) + ": the server closed a connection");
    return false;
  }
  c.in.append(buf, static_cast<size_t>(n));
  size_t off = 0;
  int64_t got = 0;
  int r = 0;
  while ((r = NextFrame(c.in, &off, &got)) == 1) {
    if (got != step || c.answered == step) {
      Fail("an answer for step " + std::to_string(got) + " came during step " + std::to_string(step));
      return false;
    }
    c.answered = step;
    --*pending;
    *last = Clock::now();
  }
  if (r < 0) Fail("a malformed answer at step " + std::to_string(step));
  c.in.erase(0, off);
  return r >= 0;
}

void FloorClients::CloseAll() {
  for (Client& c : clients_) {
    if (c.fd >= 0) close(c.fd);
    c.fd = -1;
  }
  if (ep_ >= 0) close(ep_);
  ep_ = -1;
}

int Drive(const Options& o, int port, pid_t server) {
  FloorClients clients(o, port, server);
  return clients.Run();
}

bool FloorClients::EndServer() {
  const Clock::time_point give_up = Clock::now() + FloorSeconds(o_.timeout_s);
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(server_, &status, WNOHANG)) == 0 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // it exits once it sees every close
  }
  if (r == 0) {
    kill(server_, SIGKILL);
    waitpid(server_, &status, 0);
    Fail("the server did not exit within --timeout-s of the clients closing");
    return false;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    Fail("the server failed (its reason is on stderr)");
    return false;
  }
  return true;
}

}  // namespace ft_floor_load
