// ft_floor_load's server, in the forked child: see ft_floor_load.h. One
// thread, level-triggered epoll, one recv per readiness, one send per
// answer: the least a server can do to take one frame from each group and
// answer each once all are in.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ft_floor_load.h"

namespace ft_floor_load {
namespace {

struct Peer {
  int fd = -1;
  std::string in;
  std::string out;     // the part of an answer not written yet
  int64_t voted = -1;  // the last step it sent
};

class FloorServer {
 public:
  FloorServer(int listen_fd, const Options& o) : listen_(listen_fd), o_(o) {
    peers_.resize(static_cast<size_t>(o.groups));
  }
  int Run();

 private:
  void Accept();
  void Read(Peer& p);
  void Vote(int64_t step, Peer& p);
  void AnswerAll();
  void Write(Peer& p);
  void Close(Peer& p);
  void Fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }

  int listen_;
  const Options& o_;
  int ep_ = -1;
  std::vector<Peer> peers_;
  int accepted_ = 0, open_ = 0;
  int64_t step_ = 0;
  int votes_ = 0;
  std::string answer_;
  std::string error_;
};

int FloorServer::Run() {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = 0;  // the listening socket; peer i is i + 1
  epoll_ctl(ep_, EPOLL_CTL_ADD, listen_, &ev);
  using Clock = std::chrono::steady_clock;
  const double bound_s = o_.timeout_s + (o_.steps + 1) * (o_.step_s + o_.timeout_s);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bound_s));
  std::vector<epoll_event> events(1024);
  while (error_.empty() && !(accepted_ == o_.groups && open_ == 0)) {
    if (Clock::now() > deadline) Fail("the run outlived its bound (--timeout-s, --steps, --step-s)");
    const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), 1000);
    if (n < 0 && errno != EINTR) Fail(std::string("epoll_wait: ") + std::strerror(errno));
    for (int i = 0; i < n; ++i) {
      const uint32_t id = events[i].data.u32;
      if (id == 0) {
        Accept();
        continue;
      }
      Peer& p = peers_[id - 1];
      if ((events[i].events & EPOLLOUT) && p.fd >= 0) Write(p);
      if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && p.fd >= 0) Read(p);
    }
  }
  if (!error_.empty()) std::fprintf(stderr, "ft_floor_load: the server: %s\n", error_.c_str());
  return error_.empty() ? 0 : 1;
}

void FloorServer::Accept() {
  while (true) {
    const int fd = accept4(listen_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR) Fail(std::string("accept: ") + std::strerror(errno));
      return;
    }
    if (accepted_ == o_.groups) {
      close(fd);  // not one of the run's groups
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Peer& p = peers_[static_cast<size_t>(accepted_)];
    p.fd = fd;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(++accepted_);
    epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
    ++open_;
  }
}

void FloorServer::Read(Peer& p) {
  char buf[16384];
  const ssize_t n = recv(p.fd, buf, sizeof(buf), 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    Close(p);
    return;
  }
  if (n < 0) return;
  p.in.append(buf, static_cast<size_t>(n));
  size_t off = 0;
  int64_t step = 0;
  int got = 0;
  while ((got = NextFrame(p.in, &off, &step)) == 1) Vote(step, p);
  if (got < 0) Fail("a client sent a malformed frame");
  p.in.erase(0, off);
}

void FloorServer::Vote(int64_t step, Peer& p) {
  if (step != step_ || p.voted == step) {
    Fail("a client sent step " + std::to_string(step) + " during step " + std::to_string(step_));
    return;
  }
  p.voted = step;
  if (++votes_ == o_.groups) AnswerAll();
}

void FloorServer::AnswerAll() {
  answer_.clear();
  AppendFrame(answer_, step_, static_cast<size_t>(o_.reply_bytes));
  for (Peer& p : peers_) {
    if (p.fd < 0) continue;
    if (!p.out.empty()) {
      Fail("a client did not read its last answer");
      return;
    }
    const ssize_t n = send(p.fd, answer_.data(), answer_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    const size_t sent = n > 0 ? static_cast<size_t>(n) : 0;
    if (sent == answer_.size()) continue;
    if (n < 0 && errno != EAGAIN) {
      Close(p);
      continue;
    }
    p.out = answer_.substr(sent);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u32 = static_cast<uint32_t>(&p - peers_.data() + 1);
    epoll_ctl(ep_, EPOLL_CTL_MOD, p.fd, &ev);
  }
  ++step_;
  votes_ = 0;
}

void FloorServer::Write(Peer& p) {
  const ssize_t n = send(p.fd, p.out.data(), p.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && errno != EAGAIN) {
    Close(p);
    return;
  }
  if (n > 0) p.out.erase(0, static_cast<size_t>(n));
  if (!p.out.empty()) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = static_cast<uint32_t>(&p - peers_.data() + 1);
  epoll_ctl(ep_, EPOLL_CTL_MOD, p.fd, &ev);
}

void FloorServer::Close(Peer& p) {
  close(p.fd);  // leaves the epoll set with it
  p.fd = -1;
  --open_;
}

}  // namespace

int Serve(int listen_fd, const Options& o) {
  FloorServer server(listen_fd, o);
  return server.Run();
}

}  // namespace ft_floor_load
