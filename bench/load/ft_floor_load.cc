// ft_floor_load: the physical floor under bench/ft_quorum.sh's per-step
// quorum on this host: one TCP exchange per group per step, nothing else.
//
// N clients (the groups, one connection each, spread over loopback source
// addresses 127.3.x.y, --per-address per address) and one minimal server
// (one thread, epoll) in a child process (each side holds N descriptors).
// Each step every client sends one frame of --request-bytes (default: a
// compact FtSyncRequest's size as ft_quorum_load sends it); once all N are
// in, the server answers each with one frame of --reply-bytes (the compact
// FtSyncReply's), as the quorum answers once every vote is in. The clients
// step together, one step each --step-s at most; step 0 connects and is not
// measured. Measured per step, as ft_quorum_load does: the time from the
// last frame sent to the last answer (latency_s), the server's CPU seconds
// over the step (server_cpu_s, /proc) and its RSS after it.
//
// Bounds: loopback only; every wait at most --timeout-s; stops after
// --steps; the server exits when its clients close, at its own deadline, or
// when this process dies (PR_SET_PDEATHSIG).
//
// Prints one JSON object on stdout in ft_quorum_load's shape (no churn:
// losses, held_back and lost_events are 0, the world is N, one quorum), plus
// request_bytes and reply_bytes; exit 0 when every answer came for its step,
// 1 when not (the reason on stderr and in "error"), 2 for a bad argument.
//
// The parts: ft_floor_load.h, _frames.cc, _server.cc, _clients.cc,
// _report.cc.
#include "ft_floor_load.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "flag_reader.h"

namespace ft_floor_load {
namespace {

[[noreturn]] void FloorUsage(const std::string& what) {
  bench_load::PrintUsageAndExit(
      "ft_floor_load", what,
      "usage: ft_floor_load [--groups N] [--steps S] [--step-s S] [--request-bytes B] [--reply-bytes B] "
      "[--per-address K] [--timeout-s S]\n");
}

// The listening socket on 127.0.0.1, port 0; -1 with the reason on stderr.
int ListenLoopback(int backlog, int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::fprintf(stderr, "ft_floor_load: cannot listen on 127.0.0.1: %s\n", std::strerror(errno));
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

// Each process holds N connections and a few more.
bool RaiseFdLimit(int groups) {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  const rlim_t want = static_cast<rlim_t>(groups) + 64;
  if (r.rlim_cur >= want) return true;
  if (r.rlim_max < want) {
    std::fprintf(stderr, "ft_floor_load: --groups %d needs %lu descriptors a process, the hard limit is %lu: "
                 "raise it (ulimit -Hn) or run fewer groups\n", groups, static_cast<unsigned long>(want),
                 static_cast<unsigned long>(r.rlim_max));
    return false;
  }
  r.rlim_cur = want;
  return setrlimit(RLIMIT_NOFILE, &r) == 0;
}

}  // namespace

Options Parse(int argc, char** argv) {
  Options o;
  bench_load::FlagReader args(argc, argv, FloorUsage);
  args.ReadAll([&](const std::string& flag) {
    args.Value();
    if (flag == "--groups") o.groups = static_cast<int>(args.Number(1));
    else if (flag == "--steps") o.steps = static_cast<int>(args.Number(1));
    else if (flag == "--step-s") o.step_s = args.Number(0);
    else if (flag == "--request-bytes") o.request_bytes = static_cast<int>(args.Number(kStepBytes));
    else if (flag == "--reply-bytes") o.reply_bytes = static_cast<int>(args.Number(kStepBytes));
    else if (flag == "--per-address") o.per_address = static_cast<int>(args.Number(1));
    else if (flag == "--timeout-s") o.timeout_s = args.Number(1);
    else return false;
    return true;
  });
  if (o.groups > (1 << 17)) args.Fail("--groups is at most 131072 (as ft_quorum_load's)");
  if (o.request_bytes > static_cast<int>(kMaxPayload) || o.reply_bytes > static_cast<int>(kMaxPayload)) {
    args.Fail("--request-bytes and --reply-bytes are at most " + std::to_string(kMaxPayload));
  }
  return o;
}

}  // namespace ft_floor_load

int main(int argc, char** argv) {
  const ft_floor_load::Options o = ft_floor_load::Parse(argc, argv);
  int port = 0;
  if (!ft_floor_load::RaiseFdLimit(o.groups)) return 1;
  const int listen_fd = ft_floor_load::ListenLoopback(SOMAXCONN, &port);
  if (listen_fd < 0) return 1;
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t server = fork();
  if (server < 0) {
    std::fprintf(stderr, "ft_floor_load: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (server == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the clients' process gone: the server too
    if (getppid() != parent) _exit(1);  // it went before the line above
    _exit(ft_floor_load::Serve(listen_fd, o));
  }
  close(listen_fd);
  return ft_floor_load::Drive(o, port, server);
}
