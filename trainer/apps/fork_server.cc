#include "trainer/apps/fork_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/apps/exit_codes.h"

namespace ctrun::trainer {
namespace {

constexpr size_t kMaxForkRequest = 1 << 20;
constexpr size_t kMaxForkStrings = 1 << 14;

struct ForkRequest {
  bool leak_check = false;
  std::vector<std::string> args;
  std::vector<std::string> env;
};

std::optional<size_t> ParseCount(std::string_view text) {
  size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value > kMaxForkStrings) return std::nullopt;
  return value;
}

// "leak-check=<0|1>\0<argc>\0<arg>\0...<envc>\0<NAME=value>\0..." (fork_server.h).
std::optional<ForkRequest> ParseForkRequest(std::string_view data) {
  std::vector<std::string_view> fields;
  while (!data.empty()) {
    size_t end = data.find('\0');
    if (end == std::string_view::npos) return std::nullopt;
    fields.push_back(data.substr(0, end));
    data.remove_prefix(end + 1);
  }
  if (fields.empty() || (fields[0] != "leak-check=0" && fields[0] != "leak-check=1")) return std::nullopt;
  size_t at = 1;
  auto take = [&](std::vector<std::string>& out) {
    if (at >= fields.size()) return false;
    auto count = ParseCount(fields[at++]);
    if (!count || *count > fields.size() - at) return false;
    out.assign(fields.begin() + at, fields.begin() + at + *count);
    at += *count;
    return true;
  };
  ForkRequest request;
  request.leak_check = fields[0] == "leak-check=1";
  if (!take(request.args) || request.args.empty() || !take(request.env) || at != fields.size()) return std::nullopt;
  for (const auto& entry : request.env) {
    if (entry.find('=') == std::string::npos || entry.front() == '=') return std::nullopt;
  }
  return request;
}

void Reply(int sock, const std::string& text) { (void)send(sock, text.data(), text.size(), MSG_NOSIGNAL); }

// LeakSanitizer's check, in an ASan build (weak: absent otherwise).
extern "C" void __lsan_do_leak_check() __attribute__((weak));

// A forked rank's end (on_exit): stdio flushed, the leak check done if the
// request asked for it (`check` non-null), then _exit, without the static
// destructors (fork_server.h says why).
void EndForkedRank(int status, void* check) {
  std::fflush(nullptr);
  if (check != nullptr && __lsan_do_leak_check != nullptr) __lsan_do_leak_check();
  std::_Exit(status);
}

// The forked child's argv: kept for the life of the process.
std::vector<std::string> g_args;
std::vector<char*> g_argv;

// In the child: the request's streams, environment and argv.
void BecomeRank(ForkRequest request, const int fds[3], int& argc, char**& argv) {
  for (int i = 0; i < 3; ++i) dup2(fds[i], i);
  for (int i = 0; i < 3; ++i) {
    if (fds[i] > 2) close(fds[i]);
  }
  clearenv();
  for (const auto& entry : request.env) putenv(strdup(entry.c_str()));  // owned by environ from here
  g_args = std::move(request.args);
  for (auto& arg : g_args) g_argv.push_back(arg.data());
  g_argv.push_back(nullptr);
  argc = static_cast<int>(g_args.size());
  argv = g_argv.data();
  static int leak_check_requested;
  on_exit(EndForkedRank, request.leak_check ? &leak_check_requested : nullptr);
}

// Serves requests on `sock`; returns only in a forked child, as its rank.
void Serve(int sock, int& argc, char**& argv) {
  sigset_t child_signal, old_mask;
  sigemptyset(&child_signal);
  sigaddset(&child_signal, SIGCHLD);
  sigprocmask(SIG_BLOCK, &child_signal, &old_mask);
  int exits = signalfd(-1, &child_signal, SFD_CLOEXEC);
  if (exits < 0) {
    std::perror("fork server: signalfd");
    std::_Exit(1);
  }
  const pid_t server = getpid();
  std::set<pid_t> children;
  std::vector<char> buffer(kMaxForkRequest);
  for (;;) {
    pollfd ready[2] = {{sock, POLLIN, 0}, {exits, POLLIN, 0}};
    if (poll(ready, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready[1].revents & POLLIN) {
      signalfd_siginfo info;
      (void)!read(exits, &info, sizeof info);
      int status = 0;
      for (pid_t done; (done = waitpid(-1, &status, WNOHANG)) > 0;) {
        children.erase(done);
        Reply(sock, "exit " + std::to_string(done) + " " + std::to_string(status));
      }
    }
    if (!(ready[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    iovec data{buffer.data(), buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
    msghdr message{};
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    ssize_t got = recvmsg(sock, &message, MSG_CMSG_CLOEXEC);
    if (got == 0) break;  // the client is gone
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
    }
    auto request = (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || fds.size() != 3
                       ? std::nullopt
                       : ParseForkRequest(std::string_view(buffer.data(), static_cast<size_t>(got)));
    if (!request) {
      for (int fd : fds) close(fd);
      Reply(sock, "error malformed request: want leak-check=0|1, argc, argv, envc, env as NUL-ended strings "
                  "and 3 descriptors");
      continue;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(sock);
      close(exits);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != server) std::_Exit(1);  // the server died before the line above
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      BecomeRank(std::move(*request), fds.data(), argc, argv);
      return;
    }
    for (int fd : fds) close(fd);
    if (pid < 0) {
      Reply(sock, std::string("error fork: ") + std::strerror(errno));
      continue;
    }
    children.insert(pid);
    Reply(sock, "pid " + std::to_string(pid));
  }
  for (pid_t pid : children) kill(pid, SIGKILL);
  while (waitpid(-1, nullptr, 0) > 0) {
  }
  std::_Exit(0);
}

}  // namespace

void ServeForksIfAsked(int& argc, char**& argv) {
  const char* text = std::getenv("CTRUN_FORK_SERVER_FD");
  if (text == nullptr) return;
  std::string_view value(text);
  int fd = -1;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), fd);
  int type = 0;
  socklen_t size = sizeof type;
  if (error != std::errc() || end != value.data() + value.size() || fd < 3 ||
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) != 0 || type != SOCK_SEQPACKET) {
    std::fprintf(stderr, "%s: CTRUN_FORK_SERVER_FD='%s' is not a SOCK_SEQPACKET socket's descriptor (unset it)\n",
                 argc > 0 ? argv[0] : "fork server", text);
    std::exit(kExitUsage);
  }
  unsetenv("CTRUN_FORK_SERVER_FD");
  Serve(fd, argc, argv);
}

}  // namespace ctrun::trainer
